/*
 * ktune_db.h -- libktune_db: libktune's tables read straight from a ktune
 * database (the tuner's SQLite file), for hosts that tune and run in one
 * place. Link build/libktune_db.a before libktune and add -lsqlite3; the
 * rest of libktune does not need SQLite.
 */
#ifndef KTUNE_DB_H
#define KTUNE_DB_H

#include "ktune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every winner of the database at path (opened read-only; a database being
 * written by a sweep is read as of now: open again for newer winners). */
int ktune_open_db(const char *path, ktune_table **out);

#ifdef __cplusplus
}
#endif

#endif
