#include "sim/replay.h"
#include <gtest/gtest.h>
