// The trainer program: Laconic's command line (framework/cli/train_main.h).
#include "framework/cli/train_main.h"

int main(int argc, char** argv) { return laconic::train_main(argc, argv); }
