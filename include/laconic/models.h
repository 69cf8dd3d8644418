// Layers and models: the Model interface, the MLP, BERT and the GPT, and their export layouts.
#pragma once

#include "workloads/nn/linear.h"
#include "workloads/nn/activation.h"
#include "workloads/nn/layernorm.h"
#include "workloads/nn/embedding.h"
#include "workloads/nn/attention.h"
#include "workloads/nn/dropout.h"
#include "workloads/nn/softmax_xent.h"
#include "workloads/models/model.h"
#include "workloads/models/mlp.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
