#ifndef CDP_LMDB_H
#define CDP_LMDB_H
#endif
