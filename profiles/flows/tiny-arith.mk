# The pipeline of `optkit flow run tiny-arith` as make targets, for pipelines that are Makefiles
# and cron jobs: every stage is an ordinary optkit subcommand with file outputs and the documented
# exit codes (1: the quality gate or the SLOs failed), so make stops where the flow would. What the
# flow adds: the stages scheduled in parallel as their inputs appear, the choice of the best-margin
# trial, resume by content key, the package and its report. From the source tree:
#   make -f profiles/flows/tiny-arith.mk -j2 OUT=/tmp/tiny-arith-make
OPTKIT ?= build/optkit
MODEL ?= testdata/models/tiny-arith
RECIPE ?= int_w8a8
CALIB ?= --calib testdata/corpora/english.calib.txt --samples 32 --seq-len 64
SEEDS ?= 1 2 3
LIMIT ?= 0
GATE ?= profiles/flows/tiny-arith.gate.yaml
SLO ?= e2e:p95<=2s
BENCH_FLAGS ?= --min-trial-seconds 1 --max-trials 3 --beta-tolerance 0.3
TUNE_FLAGS ?= --optimizer random --trials 3
OUT ?= tiny-arith-make

GATES := $(foreach s,$(SEEDS),$(OUT)/gate-$(s).json)
FIRST := $(firstword $(SEEDS))

all: $(OUT)/tune.json

$(OUT):
	mkdir -p $@

# Compression trials: one model folder per seed (optkit writes it atomically).
$(OUT)/w8-%: | $(OUT)
	$(OPTKIT) -q compress --model $(MODEL) --recipe $(RECIPE) $(CALIB) --seed $* --threads 1 -o $@

# Each trial's quality gate against the uncompressed model: exit 1 (make stops) when it fails.
$(OUT)/gate-%.json: $(OUT)/w8-%
	$(OPTKIT) -q eval tasks --model $< --suite arith --baseline $(MODEL) --gate $(GATE) --limit $(LIMIT) \
	  --threads 1 --format json >$@.tmp && mv $@.tmp $@

# SLO certification of the first trial once every gate passed: exit 1 when infeasible.
$(OUT)/bench.json: $(GATES)
	$(OPTKIT) -q bench --engine optkit --model $(OUT)/w8-$(FIRST) --profile chat-small --slo '$(SLO)' \
	  $(BENCH_FLAGS) --no-calibration --format json >$@.tmp && mv $@.tmp $@

# Knobs tuned on the live engine; its winning launch command is in the JSON's best.launch.
$(OUT)/tune.json: $(OUT)/bench.json
	$(OPTKIT) -q tune --engine optkit --model $(OUT)/w8-$(FIRST) --space optkit-serve $(TUNE_FLAGS) \
	  --format json >$@.tmp && mv $@.tmp $@

.PHONY: all
