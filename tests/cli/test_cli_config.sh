# The config file: malformed YAML, unknown keys and wrong types each exit 2 with file:line:col.
. "$(dirname "$0")/lib.sh"

cfg="$SCRATCH/config.yaml"

printf 'workers:\n  jobs: [1, 2\n' >"$cfg"
run --config "$cfg" runs list
expect_rc 2
expect_err_has "$cfg:3:1: malformed YAML"

printf 'archive: a.db\nworkers:\n  jbos: 4\n' >"$cfg"
run --config "$cfg" runs list
expect_rc 2
expect_err_has "$cfg:3:3: unknown key 'workers.jbos'; did you mean 'workers.jobs'?"

printf 'workers:\n  timeout_s: soon\n' >"$cfg"
run --config "$cfg" runs list
expect_rc 2
expect_err_has "$cfg:2:14: 'workers.timeout_s' must be a number, got 'soon'"

printf 'log_format: yaml\n' >"$cfg"
OPTKIT_CONFIG="$cfg" run runs list
expect_rc 2
expect_err_has "$cfg:1:13: 'log_format' is 'yaml'; expected one of text, json"

run --config "$SCRATCH/missing.yaml" runs list
expect_rc 2
expect_err_has "missing.yaml: cannot read"

# A valid file is used: the archive path in it is relative to the file.
mkdir -p "$SCRATCH/conf"
printf 'archive: from-config.db\nworkers:\n  jobs: 2\n' >"$SCRATCH/conf/c.yaml"
unset OPTKIT_ARCHIVE
run --config "$SCRATCH/conf/c.yaml" runs list --format json
expect_rc 0
[ -f "$SCRATCH/conf/from-config.db" ] || fail "the config file's archive was not used"

# The standard location is read without flags.
mkdir -p "$HOME/.config/optkit"
printf 'archive: %s\n' "$SCRATCH/std.db" >"$HOME/.config/optkit/config.yaml"
run runs list
expect_rc 0
[ -f "$SCRATCH/std.db" ] || fail "~/.config/optkit/config.yaml was not read"

echo "ok"
