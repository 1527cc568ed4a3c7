#!/bin/bash
# The command set whose outputs a pure restructuring keeps byte for byte (issue 37): run it before and after, on the
# same machine, and diff the md5 lists. usage: scripts/golden_outputs.sh OUTDIR  (a repo with its venv active;
# writes OUTDIR/*.out|*.err and OUTDIR/../$(basename OUTDIR).md5)
O=${1:?usage: scripts/golden_outputs.sh OUTDIR}; mkdir -p "$O"; rm -f "$O"/*.out "$O"/*.err
run() { n=$1; shift; ( "$@" ) > $O/$n.out 2> $O/$n.err; echo "rc=$?" >> $O/$n.out; }
A="--acceptance eagle3=0.8 --acceptance dflash=0.7 --acceptance ngram=0.4"
run main specplan recommend --model llama-3.1-8b --hardware h100-sxm --context 4096 --target-tps-per-user 150 --mechanisms eagle3,dflash,ngram $A
run main_json specplan recommend --model llama-3.1-8b --hardware h100-sxm --context 4096 --target-tps-per-user 150 --mechanisms eagle3,dflash,ngram $A --json
run rec_batch specplan recommend -m llama-3.1-8b -H h100-sxm --context 4096 --batch 16 --mechanisms eagle3,ngram --acceptance eagle3=0.8 --acceptance ngram=0.4 --draft-model llama-3.2-1b
run step specplan step -m llama-3.1-8b -H h100-sxm --batch 32 --context 4096
run step_json specplan step -m deepseek-v3 -H h100-sxm --tp 1 --dp 8 --ep 8 --batch 32 --context 4096 --json
run pred_step specplan predict -m llama-3.1-8b -H h100-sxm --batch 16 --context 2048 --mechanism eagle3 --draft-len 4 --acceptance-rate 0.8
run pred_step_json specplan predict -m llama-3.1-8b -H h100-sxm --batch 16 --context 2048 --mechanism eagle3 --draft-len 4 --acceptance-rate 0.8 --json
run pred_srv specplan predict -m llama-3.3-70b -H h200-sxm --dtype fp8 --tp 2 --isl 2048 --osl 512 --concurrency 128
run pred_srv_json specplan predict -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --concurrency 32 --mechanism eagle3 -D 3 --acceptance-rate 0.7 --engine vllm --json
run pred_load specplan predict -m llama-3.1-8b -H h100-sxm --isl 128 --osl 1024 --mechanism eagle3 -D 3 --engine vllm --concurrency 1,8,32,64,128
run pred_disagg specplan predict -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --concurrency 32 --mode disagg --pools 1P2D --json
run pred_moe specplan predict -m deepseek-r1 -H h200-sxm --tp 1 --dp 8 --ep 8 --isl 4096 --osl 1024 --concurrency 256 --mechanism mtp -D 3 --acceptance-rate 0.7 --json
run rec_srv specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --max-tpot-ms 20 --max-ttft-ms 1000 --mechanisms eagle3 --acceptance eagle3=0.7
run rec_srv_json specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --max-tpot-ms 20 --max-ttft-ms 1000 --mechanisms eagle3 --acceptance eagle3=0.7 --json
run rec_gpus specplan recommend --model llama-3.3-70b --hardware h200-sxm --dtype fp8 --engine vllm --isl 2048 --osl 512 --max-ttft-ms 1000 --max-tpot-ms 30 --gpus 8
run rec_gpus_json specplan recommend --model llama-3.3-70b --hardware h200-sxm --dtype fp8 --engine vllm --isl 2048 --osl 512 --max-ttft-ms 1000 --max-tpot-ms 30 --gpus 8 --json
run rec_gpus_moe specplan recommend -m deepseek-v3 -H h200-sxm --gpus 32 --isl 4096 --osl 1024 --max-ttft-ms 2000 --max-tpot-ms 50 --mechanisms mtp --acceptance mtp=0.7
run rec_load specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --target-tps 20000 --target-tps-per-user 50 --mechanisms eagle3 --acceptance eagle3=0.7
run rec_load_json specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --target-tps 20000 --target-tps-per-user 50 --mechanisms eagle3 --acceptance eagle3=0.7 --json
run rec_rate specplan recommend -m llama-3.1-8b -H h100-sxm -H a100-sxm-80gb --isl 1024 --osl 256 --request-rate 20 --max-tpot-ms 30 --objective cost
run rec_rate_json specplan recommend -m llama-3.1-8b -H h100-sxm -H a100-sxm-80gb --isl 1024 --osl 256 --request-rate 20 --max-tpot-ms 30 --objective cost --json
run rec_ds specplan recommend -m llama-3.1-8b -H h100-sxm --context 4096 --target-tps-per-user 150 --mechanisms eagle3,ngram --dataset code
run rec_emit specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --max-tpot-ms 20 --mechanisms eagle3 --acceptance eagle3=0.7 --emit vllm
run rec_energy specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --max-tpot-ms 20 --mechanisms eagle3 --acceptance eagle3=0.7 --objective energy
run profiles specplan profiles list
run profiles_json specplan profiles list --json
run adaptive specplan adaptive -m llama-3.1-8b -H h100-sxm --request-rate 4 --requests 200 --isl 512 --osl 256 --acceptance-rate 0.8 --policies fixed:3,sglang,oracle --json
run study bash -c "specplan study examples/studies/bandwidth_h100_h200_b200.yaml -o $O/study_out >/dev/null && cat $O/study_out/summary.md"
run pareto bash -c "specplan pareto -m llama-3.1-8b -H h100-sxm --no-plots -o $O/pareto_out >/dev/null && cat $O/pareto_out/*.csv"
run pareto_srv bash -c "specplan pareto -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --no-plots -o $O/pareto_srv_out >/dev/null && cat $O/pareto_srv_out/*.csv"
run err1 specplan recommend -m llama-3.1-8x -H h100-sxm --context 4096 --batch 4
run err2 specplan predict -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --concurrency 0
run err3 specplan recommend -m llama-3.1-8b -H h100-sxm --isl 1024 --osl 256 --gpus 3.5
run err4 specplan recommend -m llama-3.1-8b -H h100-sxm --context 4096 --batch 4 --acceptance eagle3=1.7
rm -rf $O/study_out $O/pareto_out $O/pareto_srv_out
(cd $O && md5sum *.out *.err) > $O/../$(basename $O).md5
