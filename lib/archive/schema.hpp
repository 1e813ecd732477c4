// The archive schema and its migrations, versioned with PRAGMA user_version.
#pragma once

#include <string>
#include <vector>

namespace optkit::archive {

class Database;

// 'optk' — marks a SQLite file as an optkit archive.
inline constexpr int k_application_id = 0x6f70746b;

// migrations()[i] takes the schema from version i to version i + 1.
const std::vector<std::string>& migrations();
int latest_schema_version();

// Brings `db` to the latest schema. Safe when several processes open a new archive at once:
// the upgrade runs under BEGIN IMMEDIATE and re-reads the version inside the transaction.
// Throws InputError when the file is another application's database or a newer optkit's.
void migrate(Database& db);

int read_schema_version(Database& db);

} // namespace optkit::archive
