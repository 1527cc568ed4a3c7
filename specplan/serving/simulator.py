"""Request-level serving simulator: engine step by engine step, each step priced from a precomputed StepTable.

One engine (one DP rank) serves a list of requests (arrival, ISL, OSL, cached prefix tokens, accepted tokens per
iteration). Each loop turn schedules one engine step as the engine's scheduler would, prices it from the table
(serving/step_table.py: the analytical model's own step costs, looked up, never recomputed) and the engine's host
costs (speculation.round.round_s, EngineProfile.step_s), and advances time; stretches of pure decode steps with no
event in between (no arrival, completion or admission) are taken in one jump of k identical steps, priced at the
mid-jump context, so the work is per event, not per token.

Admission, per engine, from the engine profile's flags (`admission_kind`):

- `pack` (mixed_prefill false: SGLang's default scheduler). sglang srt/managers/scheduler.py
  `get_next_batch_to_run`: a new prefill batch, when one can be formed, runs before the running batch decodes
  (prefill first, decoding waits); srt/managers/schedule_policy.py `PrefillAdder`: waiting requests are packed
  FCFS into one prefill batch up to the chunked-prefill budget (chunked_prefill_size, 8192 on H100), the request
  that does not fit whole is chunked (`add_chunked_req`) and continues first in the next prefill batch; a request
  is admitted while the KV pool holds its prompt plus `new_token_ratio` x its output (SGLANG_INIT_NEW_TOKEN_RATIO
  0.7, sglang srt/environ.py; 1.0 for a request sent with ignore_eos, as fixed-length benchmarks send them:
  schedule_policy.py `_get_running_request_total_token_offset`; held constant here: its decay and retraction are
  not modelled) and the running count stays under max_running_requests. Read in the sglang 0.5.23 wheel
  (srt/managers/scheduler.py `get_next_batch_to_run`: "Run prefill first if possible"; `event_loop_overlap`).
- `budget` (mixed, chunked prefill: vLLM V1). vllm/v1/core/sched/scheduler.py `Scheduler.schedule` (read through
  the search tool's excerpts, not in a downloaded wheel this session): the running
  requests first (decode rows, then the partial prefills' next chunks), then waiting requests FCFS within what is
  left of max_num_batched_tokens (a long prompt chunked to the budget left), up to max_num_seqs running; KV blocks
  are allocated on demand (`kv_cache_manager.allocate_slots`) and when they run out the last-admitted running
  request is preempted (recompute: it returns to the front of the waiting queue and prefills its prompt and the
  tokens it already generated again).
- `reserve` (mixed, no context chunking: TensorRT-LLM's PyTorch backend). tensorrt_llm/_torch/pyexecutor/
  scheduler.py `GuaranteedNoEvictScheduler`; GUARANTEED_NO_EVICT is the default CapacitySchedulerPolicy (TensorRT-LLM
  docs, performance-tuning-guide/useful-runtime-flags, and llmapi SchedulerConfig): a request is
  admitted only if the KV cache holds its whole ISL + OSL beside the running requests' reservations; whole
  prompts (enable_chunked_prefill false by default) share the step with the decode rows within max_num_tokens,
  up to max_batch_size requests.

TensorRT-LLM's request life, step by step, as its PyTorch executor runs it (tensorrt_llm/_torch/pyexecutor/
py_executor.py and executor_request_queue.py of mid-2025, the ExecutorRequestQueue code next to 1.0.0rc3, read
through the search tool; issue 39 audit, session 19). Each iteration of `_executor_loop_overlap`: `_fetch_new_requests`,
`_schedule`, `prepare_resources`, `_forward_step` (launch step j), `_update_requests(previous batch)` (waits for
step j - 1, adds its tokens, marks the finished), `_sample_async`, `_update_request_states` (a prompt done -> generation),
`_process_previous_batch` -> `_handle_responses` (responses of step j - 1's tokens; a final one ->
`_terminate_request` -> `resource_manager.free_resources`, out of active_requests).
- Fetch: `fetch_new_requests(len(active_requests))` takes up to max_num_active_requests (get_max_num_sequences:
  pp_size x max_batch_size) - active; with no active request it blocks (`_get_from_request_queue`, timeout None) and
  returns the one request that woke it: an idle engine's first step holds one prompt (`blocked` here), the rest
  join the next fetch. Simulated so.
- Scheduled: in the iteration that fetched it; that fetch runs while step j - 1 is on the GPU, right after step
  j - 2's responses: a request arriving during step n joins step n + 2 (`seen` below). Simulated so.
- Context step a: the prompt whole (no chunking) beside the decode rows within max_num_tokens. Simulated so.
- First token: sampled in step a, added and answered in iteration a + 1 (py_decoding_iter 1), i.e. at step a's
  end. Simulated so (`first_token_s`, the first decode row in step a + 1).
- Last token (step n): the request is scheduled into step n + 1 before `_update_requests` marks it finished, then
  answered and terminated in iteration n + 1: slot and KV free for the schedule of step n + 2
  (finished_slot_steps 1). Simulated so (`draining`).
- Next request of that client: it is sent on the last token's response, which `_handle_responses` emits after step
  n + 1 was launched and just before the loop fetches for step n + 2: it joins step n + 3 at the earliest (`answer`;
  until session 19 the simulator let it join step n + 2). Its transit (HTTP, tokenization, IPC) is not simulated.
- Outside the loop (session 20, trtllm-serve's path read through the search tool, mid-2025 versions next to
  1.0.0rc3: serve.py, executor/worker.py, proxy.py, ipc.py, py_executor.py; docs/notes/issue39_trt_serving_path.md):
  no polling period or batching interval lies on the way. The worker's response thread waits on the executor's
  condition variable (`await_responses(timeout=100 ms)` is only the wait's cap; `_enqueue_responses` notifies),
  sends each iteration's responses as one ZMQ message (FusedIpcQueue, fuse_message False), the proxy's dispatch
  thread blocks on the ZMQ receive and wakes the asyncio loop; `stream_interval` (PyTorchConfig, default 1) answers
  every iteration; detokenization and the OpenAI chunk run in the server process (trtllm-serve
  --num_postprocess_workers default 0); a new request is tokenized there, sent over ZMQ, received by rank 0's worker
  thread (blocking) and put on the executor's queue. At TP > 1 every iteration broadcasts the fetched requests
  (`_broadcast_new_requests`) and the cancelled ids (`_handle_cancelled_requests`) over MPI: per-step host work, in
  the fitted host numbers. None of these hops states a time. With C + 1 clients on C slots the first and the last
  token take the same response path (it cancels out of TTFT) and a client's round trip is absorbed by the wait for a
  slot while it is shorter than the slot's turnover H / C (40-260 ms on the TensorRT-LLM rows): not simulated.

The prompt's first token is sampled at the end of the step that computes its last prompt token (TTFT); the
remaining OSL - 1 tokens come from decode iterations, `accepted_tokens` per iteration (1 without speculation: a
speculative request's acceptance length, drawn per request by the caller). A draft-length schedule (vLLM
`num_speculative_tokens_per_batch_size`, TensorRT-LLM `draft_len_schedule`: D by batch size) gives one StepTable
per D and accepted tokens per request and D (an (n, tables) array); `SimConfig.d_index[b]` names the table of a
step whose scheduler holds b requests (running or prefilling when the step is scheduled; vLLM keys on the step's
scheduled requests, v1/core/sched/scheduler.py `dynamic_sd_lookup[len(num_scheduled_tokens)]`). Prefix caching: `cached_tokens` of a
prompt are already in the KV cache (a prefix hit): they are not prefilled and the chunk's attention starts after
them; shared prefixes are stored once (the caller's `shared_kv_tokens`). KV offload (`host_load_s_per_token`): the
shared prefixes are held in host memory instead, and a request's cached tokens are copied into its own HBM KV over
the host link (PCIe, NVLink-C2C: HardwareProfile.host_link_bandwidth_bytes_s) when its prompt is first scheduled,
that copy's seconds added to the step (not overlapped with it: an assumption; vLLM's offloading connector and
LMCache load the blocks before the forward that reads them); a preempted request loads them again.

Per-step policies (issue 39: the adaptive policies run here): `SimConfig.policy`, an object with
`index(view: PolicyView) -> int` (the table, i.e. the D, of the next step) and `observe(accepted, index, batch)`,
is asked before every step that has decode rows, in place of the D schedule; with it the simulator steps one
iteration at a time (no jumps; a policy whose `per_step` is False, one constant D, keeps the jumps). `SimConfig.draws` (TokenDraws): acceptance drawn per output token with common random
numbers, as adaptive/simulator.py draws it: request i's output token at position p (1 = the first decoded after
the prompt's token) has one uniform u_ip; a draft k of an iteration at position p is accepted iff
u_i(p + k) < α_i (moved by a drift over the output, or p_k of a per-position vector), an iteration accepts the leading run of accepted drafts and emits it + 1 (at most the tokens
left), so every policy sees the same tokens. `SimConfig.graphs` (an (running cap + 1, tables) boolean array):
the (batch, D) decode steps that replay a captured CUDA graph; the others run eagerly (round_s eager=True, plus
`SimConfig.eager_extra_s` of that table where the caller adds an eager cost the engine profile does not state),
counted in SimRun.eager_steps.

Arrivals: open loop (`arrival_s` given, sorted) or closed loop (`clients` C: the first C requests arrive at 0,
each completion releases the next request at once, as benchmark clients that all start together run).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from specplan.core.records import Record, record
from specplan.core.errors import SpecplanError
from specplan.serving.step_table import StepTable
from specplan.speculation.round import round_s

ADMISSION_KINDS = ("pack", "budget", "reserve")
SGLANG_NEW_TOKEN_RATIO = 0.7  # sglang srt/managers/schedule_policy.py: SGLANG_INIT_NEW_TOKEN_RATIO default 0.7
MAX_JUMP_STEPS = 1 << 20
PF_EMA = 0.95  # smoothing of the prompt seconds per decode step a policy is shown (adaptive/simulator.py's)


def admission_kind(eng) -> str:
    """The scheduler an engine profile describes: 'pack' (prefill batches apart, SGLang), 'reserve' (no context
    chunking, whole KV reserved: TensorRT-LLM), else 'budget' (chunked prefill in the token budget: vLLM)."""
    if not eng.mixed_prefill:
        return "pack"
    return "budget" if eng.chunked_prefill else "reserve"


@record
class SimRequests:
    """Requests in release order: prompt / output / cached-prefix tokens, accepted tokens per iteration, and
    arrival seconds (open loop; None in a closed loop, where `clients` release them)."""

    isl: np.ndarray
    osl: np.ndarray
    cached_tokens: np.ndarray
    accepted_tokens: np.ndarray
    arrival_s: np.ndarray | None = None


@record
class TokenDraws:
    """Per-token acceptance draws shared by every policy: uniform u[offsets[i] + p] of request i's output position
    p, its acceptance rate alpha[i], and the draft length of each step table (ds[j])."""

    offsets: np.ndarray
    uniforms: np.ndarray
    alpha: np.ndarray
    ds: tuple
    drift: float = 0.0  # α_i moves linearly by this much from the first to the last output token (clipped to [0, 1])
    per_position: tuple = ()  # p_1..p_n: the k-th draft of an iteration is accepted iff u < p_k (replaces α)
    osl: np.ndarray | None = None  # output tokens per request (the drift's span); needed with a drift


@record
class PolicyView:
    """What a per-step policy sees before a step: the scheduled batch, the decoding requests (ids, output
    position), and the decode step's seconds for each table (eager where no graph is captured)."""

    batch: int
    running: np.ndarray
    position: np.ndarray
    step_s: np.ndarray
    prefill_s: float = 0.0  # exponential mean of prompt seconds per decode step (what a request's TPOT carries)


@record(eq=False)
class StepSeries(Record):
    """One simulated run's steps (arrays over the steps): start time (s), decode batch, D that ran, tokens per
    sequence (AL), step seconds, prompt tokens prefilled in the step."""

    t_s: np.ndarray
    batch: np.ndarray
    draft_len: np.ndarray
    al: np.ndarray
    step_s: np.ndarray
    prefill_tokens: np.ndarray


@record
class SimConfig:
    """One engine's limits for the simulation: running cap, step token budget, KV tokens, scheduler kind."""

    running_cap: int
    budget_tokens: int
    kv_tokens: float
    kind: str
    clients: int | None = None  # closed loop: clients starting together at 0
    shared_kv_tokens: float = 0.0  # shared prefixes stored once in the KV cache
    devices: float = 1.0
    client_start_s: tuple = ()  # closed loop: each client's first send (empty: all at 0, together)
    new_token_ratio: float = SGLANG_NEW_TOKEN_RATIO  # pack: share of a request's output its admission reserves
    d_index: tuple = ()  # D schedule: table index per scheduled batch size 0..max (empty: one table)
    host_load_s_per_token: float | None = None  # KV offload: seconds per cached token over the host link (None: off)
    policy: object = None  # per-step D policy (index(view) -> table, observe(...)); None: d_index or one table
    draws: TokenDraws | None = None  # per-token acceptance draws (None: the mean accepted tokens per iteration)
    graphs: np.ndarray | None = None  # (running cap + 1, tables) captured decode graphs (None: all captured)
    eager_extra_s: tuple = ()  # seconds an eager decode step adds per table beyond round_s's eager pricing


@record
class SimRun:
    """Per-request times (seconds) of one simulation, and time-integrated counts for Little's law."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    osl: np.ndarray
    end_s: float
    in_system_s: float  # integral over time of requests arrived and not finished (request-seconds)
    decoding_s: float  # integral over time of requests decoding
    steps: int
    preemptions: int
    eager_steps: int = 0
    series: StepSeries | None = None  # per-step rows, recorded with a policy or draws (None otherwise)


class _Engine:
    """The simulation state: requests' progress, queues, KV use and the clock."""

    def __init__(self, tab, eng, req: SimRequests, cfg: SimConfig):
        self.tabs = tuple(tab) if isinstance(tab, (tuple, list)) else (tab,)
        tab = self.tabs[0]
        self.tab, self.eng, self.cfg = tab, eng, cfg
        self.isl = req.isl.astype(float)
        self.osl = req.osl.astype(float)
        self.hit = np.minimum(req.cached_tokens.astype(float), self.isl - 1.0)
        self.accs = np.maximum(req.accepted_tokens.astype(float), 1e-6).reshape(req.isl.size, -1)
        self.acc = self.accs[:, 0]
        self.j = 0  # the table (D) of the current step
        # one iteration per step with drawn tokens or a policy that may change D (not one that says per_step False)
        self.per_step = cfg.draws is not None or (cfg.policy is not None and getattr(cfg.policy, "per_step", True))
        self.eager_steps = 0
        self.emitted = 0.0  # tokens the last step's decode rows emitted
        self.pf_pending, self.pf_mean = 0.0, 0.0  # prompt seconds since the last decode step; their mean per step
        self.rec = [] if self.per_step else None
        n = self.isl.size
        self.n = n
        self.pre_target = self.isl.copy()  # tokens the prompt holds when prefilled (grows after a preemption)
        self.pre_done = self.hit.copy()  # prompt tokens in the KV cache
        self.gen = np.zeros(n)  # tokens generated after the first
        self.need = self.osl - 1.0
        self.arr = np.full(n, np.nan) if req.arrival_s is None else req.arrival_s.astype(float)
        self.first = np.full(n, np.nan)
        self.fin = np.full(n, np.nan)
        self.reserved = np.zeros(n)  # KV tokens held or reserved per admitted request
        self.waiting: deque = deque()
        self.draining: list = []  # (request, finish s): finished, slot and KV held one more step
        self.pending: deque = deque()  # arrived, not yet visible to the scheduler (overlap: the next batch is set)
        self.overlap = bool(eng.overlap_scheduler)
        self.step_start = 0.0  # when the last step began: an overlap scheduler set the next batch then
        self.pyexec = cfg.kind == "reserve"  # TensorRT-LLM's PyExecutor request fetch (_fetch_new_requests)
        self.answer = np.zeros(n, dtype=bool)  # sent by a client on its last token's response (closed loop)
        self.blocked = self.pyexec  # PyExecutor idle: its fetch blocks until one request comes (it starts so)
        self.prefilling: list = []  # admitted, prompt not finished (FCFS)
        self.running: list = []  # decoding
        self.t = 0.0
        self.offload = cfg.host_load_s_per_token is not None
        self.kv_used = 0.0 if self.offload else cfg.shared_kv_tokens  # offloaded prefixes live in host memory
        self.loaded = np.zeros(n, dtype=bool)  # offload: cached tokens copied into the request's HBM KV
        self.next_release = 0  # next request index not yet arrived
        self.done = 0
        self.steps = 0
        self.preemptions = 0
        self.in_system_s = 0.0
        self.decoding_s = 0.0
        self.arrived = 0
        self.overs = tuple(StepOverheads(eng, (t.draft_len, t.tokens_per_seq, t.target_kernels, t.draft_kernels),
                                         int(cfg.running_cap) + 2) for t in self.tabs)
        self.over = self.overs[0]
        self.starts = sorted(cfg.client_start_s)[:min(cfg.clients or 0, n)]
        if cfg.clients is not None and not self.starts:
            for _ in range(min(cfg.clients, n)):
                self._release(0.0)

    # arrivals -----------------------------------------------------------------------------------------------
    def _release(self, t: float) -> None:
        i = self.next_release
        self.next_release += 1
        self.arr[i] = t
        self.pending.append(i)
        self.arrived += 1

    def _arrivals_until(self, t: float) -> None:
        """Every request arriving by t is pending; those the scheduler sees join the waiting queue: arrived by
        now, or with an overlap scheduler by the start of the running step (sglang scheduler.py
        `event_loop_overlap`, TensorRT-LLM py_executor.py `_executor_loop_overlap`: the next batch is scheduled
        while the current one runs on the GPU, so a request arriving during step n joins step n + 2)."""
        if self.cfg.clients is not None:
            while self.starts and self.starts[0] <= t + 1e-12:
                if self.next_release >= self.n:  # clients that finished early have sent every request already
                    self.starts.clear()
                    break
                self.in_system_s += t - self.starts[0]  # in the system since its start, before this tick
                self._release(self.starts.pop(0))
        else:
            while self.next_release < self.n and self.arr[self.next_release] <= t + 1e-12:
                self.in_system_s += t - float(self.arr[self.next_release])
                self.pending.append(self.next_release)
                self.next_release += 1
                self.arrived += 1
        if self.draining:  # a step that began after the finish has ended: the slot and KV free
            done = self.step_start >= 0.0 and t > self.step_start
            keep = []
            for i, f in self.draining:
                if done and self.step_start >= f - 1e-12:
                    self._free(i)
                else:
                    keep.append((i, f))
            self.draining = keep
        seen = self.step_start if self.overlap else t
        if self.blocked:  # idle PyExecutor: the fetch that blocked returns the first request alone
            if self.pending and self.arr[self.pending[0]] <= t + 1e-12:
                self.waiting.append(self.pending.popleft())
                self.blocked = False
            return
        while self.pending and self._seen(self.pending[0], seen):
            self.waiting.append(self.pending.popleft())

    def _seen(self, i: int, seen: float) -> bool:
        """Whether request i is in the queue when the schedule that fetched at `seen` ran: arrived by then, or, for
        a PyExecutor request a client sent on the response of its previous request's last token (released at that
        step's end), strictly before: the fetch at that boundary ran right after the response was handled."""
        if self.answer[i]:
            return self.arr[i] < seen - 1e-12
        return self.arr[i] <= seen + 1e-12

    def _next_arrival(self) -> float:
        """When the next request arrives (or arrived, still pending)."""
        t = float(self.arr[self.pending[0]]) if self.pending else math.inf
        if self.cfg.clients is not None:
            return min(t, self.starts[0]) if self.starts else t
        if self.next_release < self.n:
            t = min(t, float(self.arr[self.next_release]))
        return t

    # KV ------------------------------------------------------------------------------------------------------
    def _kv_need(self, i: int) -> float:
        """KV tokens request i takes on admission: its whole ISL + OSL (reserve), prompt + ratio x output (pack),
        the first chunk's tokens, on demand (budget: grown as tokens are computed)."""
        new = self.pre_target[i] - (0.0 if self.offload else self.hit[i])  # offload: the copy of the hit too
        if self.cfg.kind == "reserve":
            return new + self.osl[i]
        if self.cfg.kind == "pack":
            return new + self.cfg.new_token_ratio * self.osl[i]
        return 0.0

    def _admit(self, i: int) -> None:
        r = self._kv_need(i) + (self.hit[i] if self.offload and self.cfg.kind == "budget" else 0.0)
        self.reserved[i] = r
        self.kv_used += r
        self.prefilling.append(i)

    def _extra_step_s(self) -> float:
        """Seconds of the extra decode step of the held (finished) requests alone."""
        b = len(self.draining)
        return self.over.step_s(self.tab.decode_s(b, float(np.mean(self.pre_target[[i for i, _ in self.draining]]))),
                                b, False)

    def admitted(self) -> int:
        """Requests holding a batch slot: decoding, prefilling, finished but not yet released."""
        return len(self.running) + len(self.prefilling) + len(self.draining)

    def _can_admit(self, i: int, admitted: int) -> bool:
        if admitted >= self.cfg.running_cap:
            return False
        if self.cfg.kind == "budget":
            return True  # blocks allocated per chunk (checked as scheduled)
        return self.kv_used + self._kv_need(i) <= self.cfg.kv_tokens or admitted == 0

    def _grow_kv(self, i: int, tokens: float) -> None:
        """On-demand allocation (budget): request i's KV grows by `tokens`."""
        if self.cfg.kind == "budget":
            self.reserved[i] += tokens
            self.kv_used += tokens

    def _free(self, i: int) -> None:
        self.kv_used -= self.reserved[i]
        self.reserved[i] = 0.0

    def _preempt_for(self, tokens: float) -> bool:
        """vLLM recompute preemption: free the last-admitted running requests until `tokens` more fit; False when
        nothing is left to preempt."""
        while self.kv_used + tokens > self.cfg.kv_tokens and len(self.running) > 1:
            i = self.running.pop()
            self._free(i)
            self.pre_target[i] = self.isl[i] + math.floor(self.gen[i])
            self.pre_done[i] = self.hit[i]
            self.loaded[i] = False
            self.waiting.appendleft(i)
            self.preemptions += 1
        return self.kv_used + tokens <= self.cfg.kv_tokens


def _ctx_mean(s: _Engine) -> float:
    """Mean cached tokens of the decoding requests."""
    r = s.running
    if not r:
        return 0.0
    return float(np.mean(s.pre_target[r] + s.gen[r]))


def _plan_chunks(s: _Engine, room: float) -> list:
    """Prompt chunks (request, tokens, cached context) of the next step within `room` tokens: partial prefills
    first, then waiting requests FCFS as the engine admits them (whole prompts under `reserve`, chunked else)."""
    kind = s.cfg.kind
    chunks = []
    admitted = s.admitted()
    for i in list(s.prefilling):
        if room <= 0:
            break
        left = s.pre_target[i] - s.pre_done[i]
        take = left if kind == "reserve" else min(left, room)
        chunks.append((i, take, s.pre_done[i]))
        room -= take
    while s.waiting and room > 0:
        i = s.waiting[0]
        left = s.pre_target[i] - s.pre_done[i]
        if kind == "reserve" and left > room and chunks:
            break  # whole prompts only; one longer than the budget runs alone
        if not s._can_admit(i, admitted):
            break
        s.waiting.popleft()
        s._admit(i)
        admitted += 1
        take = left if kind == "reserve" else min(left, room)
        chunks.append((i, take, s.pre_done[i]))
        room -= take
    return chunks


class StepOverheads:
    """speculation.round.round_s as a lookup: round_s is host + max(gpu, launches) + gap (max(gpu, host +
    launches) + gap with overlap), so per whole running count b and graph state it is held as two numbers, found by
    pricing round_s once, vectorized, at gpu = 0 and at a gpu beyond any host time; a step's prompt tokens add
    prefill_tokens_s each to the host side (tests/serving/test_simulator.py checks it against round_s)."""

    def __init__(self, eng, rnd: tuple, b_max: int):
        b = np.arange(0, b_max + 1, dtype=float)
        big = 1e3
        self.gap, self.pts = float(eng.step_gap_s), float(eng.prefill_tokens_s)
        spec = float(rnd[0]) > 0
        self.overlap = bool(eng.spec_overlap if spec else eng.overlap_scheduler)
        self.rows = {}
        for eager in (False, True):
            f0 = np.asarray(round_s(eng, 0.0, b, *rnd, eager=eager), dtype=float) * np.ones(b.shape)
            fg = np.asarray(round_s(eng, big, b, *rnd, eager=eager), dtype=float) * np.ones(b.shape)
            h = np.maximum(fg - big - self.gap, 0.0)
            self.rows[eager] = (h.tolist(), (f0 - self.gap - h).tolist())
        self.b_max = b_max
        self.eng, self.rnd = eng, rnd

    def step_s(self, gpu: float, b: int, eager: bool, prompt_tokens: float = 0.0) -> float:
        """round_s(eng, gpu, b, *rnd, eager=eager, prompt_tokens=prompt_tokens), looked up."""
        if b > self.b_max:
            return float(round_s(self.eng, gpu, b, *self.rnd, eager=eager, prompt_tokens=prompt_tokens))
        h, launch = self.rows[eager]
        extra = prompt_tokens * self.pts
        if self.overlap:
            return h[b] + max(gpu, launch[b] + extra) + self.gap
        return h[b] + extra + max(gpu, launch[b]) + self.gap


def _eager(s: _Engine, b: int, j: int) -> bool:
    """Whether a decode step of b rows with table j runs eagerly (no captured graph for that batch and D)."""
    g = s.cfg.graphs
    return g is not None and not bool(g[min(b, g.shape[0] - 1), j])


def _decode_step_s(s: _Engine, b: int, ctx: float, j: int) -> float:
    """Engine seconds of a decode step of b rows at mean context ctx with table j (eager where no graph)."""
    eager = _eager(s, b, j)
    extra = s.cfg.eager_extra_s[j] if eager and s.cfg.eager_extra_s else 0.0
    return s.overs[j].step_s(s.tabs[j].decode_s(b, ctx), b, eager) + extra


def _step_seconds(s: _Engine, b: int, ctx: float, chunks: list) -> float:
    """Engine seconds of a step of b decode rows at mean context ctx carrying `chunks`."""
    tab, eng = s.tab, s.eng
    if not chunks:
        return _decode_step_s(s, b, ctx, s.j)
    p = sum(c[1] for c in chunks)
    att = sum(tab.attention_s(c[1], c[2]) + tab.draft_prefill_s(c[1]) for c in chunks)
    if b == 0:
        gpu = tab.linear_s(0, p) + att
        return float(eng.step_s(gpu, len(chunks), tab.target_kernels + tab.draft_kernels, False, p))
    gpu = tab.decode_s(b, ctx) + tab.linear_s(b, p) + att
    return s.over.step_s(gpu, b + len(chunks), True, p)


def _finish(s: _Engine, i: int, t: float) -> None:
    s.fin[i] = t
    if s.eng.finished_slot_steps > 0:
        s.draining.append((i, t))
    else:
        s._free(i)
    s.done += 1
    if s.cfg.clients is not None and s.next_release < s.n:
        s.answer[s.next_release] = s.pyexec
        s._release(t)


def _after_prefill(s: _Engine, chunks: list, t: float) -> None:
    """Advance the chunks' requests; a finished prompt gives its first token at t and starts decoding."""
    for i, take, _ in chunks:
        s.pre_done[i] += take
        s._grow_kv(i, take)
        if s.pre_done[i] >= s.pre_target[i] - 1e-9:
            s.prefilling.remove(i)
            if np.isnan(s.first[i]):
                s.first[i] = t
            if s.gen[i] >= s.need[i] - 1e-9:
                _finish(s, i, t)
            else:
                s.running.append(i)


def _accepted(s: _Engine, r: np.ndarray) -> np.ndarray:
    """Accepted drafts of requests r in one iteration at the current table's D: the leading run of their drawn
    tokens u_i(p + k) < α_i, k = 0 .. D - 1, at output position p = 1 + tokens generated after the first."""
    dr = s.cfg.draws
    d = int(dr.ds[s.j])
    if d == 0 or r.size == 0:
        return np.zeros(r.size)
    pos = 1 + s.gen[r].astype(np.int64)
    k = np.arange(d)[None, :]
    idx = np.minimum(dr.offsets[r, None] + pos[:, None] + k, dr.uniforms.size - 1)
    return np.cumprod(dr.uniforms[idx] < draw_thresholds(dr, r, pos, k), axis=1).sum(axis=1).astype(float)


def draw_thresholds(dr: TokenDraws, r: np.ndarray, pos: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Acceptance probability of draft k (row vector) of requests r at output position pos: p_k, or α_i moved by
    the drift over the output, as adaptive/simulator.py `thresholds`."""
    if dr.per_position:
        p = np.asarray(dr.per_position, dtype=float)
        return np.broadcast_to(p[np.minimum(k, p.size - 1)], (r.size, k.shape[-1]))
    if not dr.drift:
        return np.broadcast_to(dr.alpha[r, None], (r.size, k.shape[-1]))
    span = np.maximum(dr.osl[r] - 1, 1)[:, None]
    return np.clip(dr.alpha[r, None] + dr.drift * (pos[:, None] + k) / span, 0.0, 1.0)


def _advance_decode(s: _Engine, k: int, t_end: float) -> None:
    """k decode iterations of the running requests, ending at t_end: completions leave."""
    r = np.asarray(s.running, dtype=int)
    if s.cfg.draws is not None:  # one iteration (per-step mode): the drawn tokens, at most those left
        acc = _accepted(s, r)
        grow = np.minimum(acc + 1.0, s.need[r] - s.gen[r])
    else:
        acc, grow = s.acc[r] - 1.0, s.acc[r] * k
    s.emitted = float(np.sum(grow))
    if s.cfg.policy is not None and r.size:
        s.cfg.policy.observe(acc, s.j, int(r.size))
    s.gen[r] += grow
    if s.cfg.kind == "budget":
        s.reserved[r] += grow
        s.kv_used += float(grow.sum())
    done = s.gen[r] >= s.need[r] - 1e-9
    if done.any():
        s.running = [i for i, d in zip(s.running, done) if not d]
        for i in r[done]:
            s.gen[i] = s.need[i]
            _finish(s, int(i), t_end)


def _tick(s: _Engine, dt: float, b: int, last_step_s: float | None = None) -> None:
    """Clock forward by dt with b requests decoding (the Little's-law integrals); the last step began
    last_step_s before the end (None: the engine was idle, its next schedule is now)."""
    in_sys = s.arrived - s.done
    s.in_system_s += in_sys * dt
    s.decoding_s += b * dt
    s.t += dt
    s.step_start = s.t - (last_step_s if last_step_s is not None else 0.0)


def _host_load_s(s: _Engine, chunks: list) -> float:
    """KV offload: seconds to copy the cached tokens of the chunks' requests not yet loaded over the host link."""
    if not s.offload:
        return 0.0
    new = [i for i, _, _ in chunks if not s.loaded[i] and s.hit[i] > 0]
    s.loaded[new] = True
    return float(s.hit[new].sum()) * float(s.cfg.host_load_s_per_token)


def _prefill_step(s: _Engine, b_rows: int) -> bool:
    """Schedule and run one step carrying prompt chunks (with b_rows decode rows); False if none can run."""
    room = float(s.cfg.budget_tokens) - b_rows * s.tab.tokens_per_seq
    if s.cfg.kind == "budget" and room <= 0:
        return False
    chunks = _plan_chunks(s, max(room, 1.0) if s.cfg.kind != "budget" else room)
    if not chunks:
        return False
    if s.cfg.kind == "budget":
        need = sum(c[1] for c in chunks) + (b_rows * 1.0)
        if not s._preempt_for(need):
            pass  # nothing left to preempt: run over the budget (the cache is smaller than one request)
        b_rows = len(s.running)
    ctx = _ctx_mean(s)
    dt = _step_seconds(s, b_rows, ctx, chunks) + _host_load_s(s, chunks)
    if s.cfg.policy is not None:  # the prompts' share of the step: what it took beyond a decode step alone
        _prompt_seconds(s, dt - (_decode_step_s(s, b_rows, ctx, s.j) if b_rows else 0.0), b_rows > 0)
    _tick(s, dt, b_rows, dt)
    s.emitted = 0.0
    if b_rows:
        _advance_decode(s, 1, s.t)
    _record(s, b_rows, dt, sum(c[1] for c in chunks))
    _after_prefill(s, chunks, s.t)
    s.steps += 1
    return True


def _decode_jump(s: _Engine) -> None:
    """Pure decode: k identical iterations up to the next event (a completion, an arrival, a KV shortfall)."""
    r = np.asarray(s.running, dtype=int)
    b = len(r)
    left = np.ceil(np.maximum(s.need[r] - s.gen[r], 0.0) / s.acc[r] - 1e-9)
    k = 1 if s.per_step else max(int(left.min()), 1)
    grow = float(s.acc[r].sum())
    if s.cfg.kind == "budget":
        room = s.cfg.kv_tokens - s.kv_used
        if room < grow:
            if s._preempt_for(grow):
                return
            k = 1
        else:
            k = min(k, max(int(room // grow), 1))
    ctx0 = float(np.mean(s.pre_target[r] + s.gen[r]))
    dt = _step_seconds(s, b, ctx0, [])
    t_a = s._next_arrival()
    if math.isfinite(t_a):  # stop at the step boundary where the scheduler first sees the next arrival
        k = min(k, max(int(math.ceil((t_a - s.t) / dt - 1e-9)) + int(s.overlap), 1))
    if s.draining:
        k = 1  # the held slots free after this step
    k = min(k, MAX_JUMP_STEPS)
    if k > 1:
        dt = _step_seconds(s, b, ctx0 + grow / b * (k - 1) / 2.0, [])
    if s.cfg.policy is not None:
        _prompt_seconds(s, 0.0, True)
    _tick(s, dt * k, b, dt)
    s.eager_steps += k * int(_eager(s, b, s.j))
    _advance_decode(s, k, s.t)
    _record(s, b, dt, 0.0)
    s.steps += k


def _prompt_seconds(s: _Engine, seconds: float, decodes: bool) -> None:
    """Add a step's prompt seconds; a step with decode rows folds those since the last one into the mean."""
    s.pf_pending += seconds
    if decodes:
        s.pf_mean = PF_EMA * s.pf_mean + (1.0 - PF_EMA) * s.pf_pending
        s.pf_pending = 0.0


def _record(s: _Engine, b: int, dt: float, prompt_tokens: float) -> None:
    """One row of the step series (per-step mode only): it began dt before now."""
    if s.rec is not None:
        d = float(s.cfg.draws.ds[s.j]) if s.cfg.draws is not None else float(s.tab.draft_len)
        s.rec.append((s.t - dt, b, d if b else 0.0, s.emitted / b if b else math.nan, dt, prompt_tokens))


def _policy_index(s: _Engine) -> int:
    """The per-step policy's table for the next step, shown each table's decode step seconds at this batch."""
    r = np.asarray(s.running, dtype=int)
    b, ctx = r.size, _ctx_mean(s)
    step = np.array([_decode_step_s(s, b, ctx, j) for j in range(len(s.tabs))])
    j = int(s.cfg.policy.index(PolicyView(b, r, 1 + s.gen[r], step, s.pf_mean)))
    if not 0 <= j < len(s.tabs):
        raise SpecplanError(f"simulator: the policy chose table {j}, outside 0..{len(s.tabs) - 1}")
    return j


def _pick_d(s: _Engine) -> None:
    """The step table, overheads and accepted tokens of the D for the next step: the per-step policy's (asked
    before every step; at batch 0 its table prices a step of prompts alone), else the D schedule's for the
    requests held now."""
    idx = s.cfg.d_index
    if s.cfg.policy is not None:
        j = _policy_index(s)
    elif idx:
        j = int(idx[min(len(s.running) + len(s.prefilling), len(idx) - 1)])
    else:
        return
    s.j, s.tab, s.over, s.acc = j, s.tabs[j], s.overs[j], s.accs[:, j]


def _turn(s: _Engine) -> None:
    """One scheduling decision: a prefill / mixed step, a decode jump, or idle until the next arrival."""
    _pick_d(s)
    kind = s.cfg.kind
    if kind == "pack":
        if (s.waiting or s.prefilling) and _prefill_step(s, 0):
            return
    elif (s.waiting or s.prefilling) and _prefill_step(s, len(s.running)):
        return
    if s.running:
        _decode_jump(s)
        return
    if s.draining:  # nothing else runs: the held slots' extra step runs alone and frees them
        _tick(s, s._extra_step_s(), 0, None)
        for i, _ in s.draining:
            s._free(i)
        s.draining = []
        return
    t_a = s._next_arrival()
    if not math.isfinite(t_a):
        raise SpecplanError("simulator: requests wait that the engine can never admit (the KV cache holds none "
                            "of them)")
    s.blocked = s.pyexec and not s.waiting and t_a > s.t + 1e-12  # empty queue, nothing active: the fetch waits
    _tick(s, max(t_a - s.t, 0.0), 0)  # idle: the next schedule sees every request arrived by then


def simulate(tab: StepTable, eng, req: SimRequests, cfg: SimConfig) -> SimRun:
    """Run every request through the engine; per-request arrival, first-token and finish seconds."""
    if cfg.kind not in ADMISSION_KINDS:
        raise SpecplanError(f"simulator: admission must be one of {', '.join(ADMISSION_KINDS)}, got '{cfg.kind}'")
    s = _Engine(tab, eng, req, cfg)
    while s.done < s.n:
        s._arrivals_until(s.t)
        _turn(s)
    series = None
    if s.rec is not None:
        cols = np.array(s.rec, dtype=float).reshape(-1, 6).T
        series = StepSeries(*cols)
    return SimRun(s.arr, s.first, s.fin, s.osl, s.t, s.in_system_s, s.decoding_s, s.steps, s.preemptions,
                  s.eager_steps, series)
