#include "allocator/packing.h"
