// Layers and models: the Model interface, the MLP, BERT and the GPT, and their export layouts.
#pragma once

#include "framework/nn/linear.h"
#include "framework/nn/activation.h"
#include "framework/nn/layernorm.h"
#include "framework/nn/embedding.h"
#include "framework/nn/attention.h"
#include "framework/nn/dropout.h"
#include "framework/nn/softmax_xent.h"
#include "framework/models/model.h"
#include "framework/models/mlp.h"
#include "framework/models/bert.h"
#include "framework/models/gpt.h"
