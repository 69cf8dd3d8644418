// The trainer's whole command line as a function: `trainer --recipe R`, `trainer compare`,
// `simulate`, `export`, `tokenize`, `plan` (docs/recipes.md "Command line"). Returns the exit code (0 ok,
// 2 bad input with a one-line message on stderr, 1 failure); prints, never exits.
#pragma once

namespace laconic {

// plot_script: where `trainer compare` finds scripts/plot when the program's own location does not
// say (an installed bin/trainer and a build tree's do; a program of the user's does not).
int train_main(int argc, char** argv, const char* plot_script);

// LACONIC_PLOT_SCRIPT comes with the Laconic::cli target (CMakeLists.txt): in the package
// (find_package(Laconic)), <prefix>/share/laconic/scripts/plot of wherever it was installed; in
// Laconic's own build tree, the source tree's scripts/plot.
#ifndef LACONIC_PLOT_SCRIPT
#define LACONIC_PLOT_SCRIPT ""
#endif
inline int train_main(int argc, char** argv) { return train_main(argc, argv, LACONIC_PLOT_SCRIPT); }

}  // namespace laconic
