// The message of the InputError a callable throws, for tests of one-line user errors. Adds a
// test failure (and returns "") when it throws none or throws another kind of exception.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

#include "core/check.h"

namespace laconic::testing {

inline std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, got none";
  return "";
}

}  // namespace laconic::testing
