#include "cdp_ptrfile.h"
