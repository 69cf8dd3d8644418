// The trainer's whole command line as a function: `trainer --recipe R`, `trainer compare`,
// `simulate`, `export`, `tokenize`, `plan` (README "Command line"). Returns the exit code (0 ok,
// 2 bad input with a one-line message on stderr, 1 failure); prints, never exits.
#pragma once

namespace laconic {

int train_main(int argc, char** argv);

}  // namespace laconic
