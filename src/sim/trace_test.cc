#include "sim/trace.h"
#include <gtest/gtest.h>
