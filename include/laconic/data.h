// Data: sources and samplers, Fashion-MNIST, text corpora, the tokenizer, token files.
#pragma once

#include "workloads/data/source.h"
#include "workloads/data/sampler.h"
#include "workloads/data/fashion_mnist.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/tokenizer.h"
#include "workloads/data/token_files.h"
#include "workloads/data/lm.h"
#include "workloads/data/mlm.h"
