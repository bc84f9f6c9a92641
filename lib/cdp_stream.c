#include "cdp_stream.h"
