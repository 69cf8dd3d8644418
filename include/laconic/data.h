// Data: sources and samplers, Fashion-MNIST, text corpora, the tokenizer, token files.
#pragma once

#include "framework/data/source.h"
#include "framework/data/sampler.h"
#include "framework/data/fashion_mnist.h"
#include "framework/data/text_corpus.h"
#include "framework/data/tokenizer.h"
#include "framework/data/token_files.h"
#include "framework/data/lm.h"
#include "framework/data/mlm.h"
