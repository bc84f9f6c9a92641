#include "cdp_lmdb.h"
