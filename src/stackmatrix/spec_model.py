"""The matrix spec as frozen, keyword-only dataclasses (the one model that the CLI,
the nox sessions and every phase read). Parsing and validation live in `specfile`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from stackmatrix.backend_registry import DEFAULT_BACKEND
from stackmatrix.engine_registry import DEFAULT_ENGINE, NAMES
from stackmatrix.metric_registry import DEFAULT_HEADLINE, HEADLINES

# the vocabularies live apart so the CLI's parser names them without these dataclasses
from stackmatrix.spec_names import BACKENDS as BACKENDS
from stackmatrix.spec_names import EXECUTORS as EXECUTORS
from stackmatrix.spec_names import FAIL_ON as FAIL_ON
from stackmatrix.spec_names import ORDERS as ORDERS
from stackmatrix.spec_names import PIPELINE_PHASES as PIPELINE_PHASES
from stackmatrix.spec_names import PROMPT_FORMS as PROMPT_FORMS
from stackmatrix.spec_names import SLO_FAIL_ON as SLO_FAIL_ON
from stackmatrix.spec_names import SLO_KEYS as SLO_KEYS

# what a headline, a load point's metric or --headline may name
METRICS: tuple[str, ...] = HEADLINES

Backend = str  # one of backend_registry.NAMES (the spec's parser holds it to them)
ENGINES: tuple[str, ...] = NAMES  # the engines' names are their registry's
# an engine's name: one of engine_registry.NAMES (the spec's parser holds it to them),
# not respelled as a Literal here, so a new engine is its registry entry and adapter
EngineName = str
WorkloadKind = Literal["random", "file"]
PromptForm = Literal["text", "token_ids"]
Order = Literal["balanced", "interleaved", "sequential", "random"]
ExecutorKind = str  # one of executor_registry.NAMES (the spec's parser holds it to them)
SloKind = Literal["ttft", "tpot", "itl", "e2e"]

MAX_LAUNCHES = 1000  # launches, rounds (per cell)
# [report]'s bounds, which run.json's copy of it is held to as well
CONFIDENCE_RANGE = (0.5, 0.999)
MIN_EFFECT_RANGE = (0.0, 0.99)


@dataclass(frozen=True, kw_only=True)
class Cell:
    id: str
    python: str = "3.11"
    cuda: str | None = None  # "12.8", "13.0"; None for a CPU-only stack
    backend: Backend = DEFAULT_BACKEND
    base_image: str | None = None
    pins: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    torch_backend: str | None = None  # uv --torch-backend (cpu, cu128, cu130, auto)
    env: tuple[tuple[str, str], ...] = ()  # sorted (name, value) pairs
    server_args: tuple[str, ...] = ()  # appended to bench.server_args for this cell
    runs_on: tuple[str, ...] = ()  # CI runner labels for this cell
    gpus: int = 0  # GPUs this cell needs (0: CPU-only)
    ca_certs: tuple[str, ...] = ()  # extra CA bundles (paths) for builds behind a TLS proxy
    # venv backend, for an air-gapped host whose image has the stack preinstalled
    #: `inherit` names an interpreter ("current": the one running
    # stackmatrix) whose packages the venv sees behind its own; `offline` installs
    # only from find_links; `no_deps` installs exactly the pins without resolving
    # their requirements (the check reports requirements nothing installed satisfies).
    inherit: str | None = None
    offline: bool = False
    no_deps: bool = False
    description: str = ""
    # the axis labels this cell came from, {axis: label}; empty for [[cell]] tables
    axes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Workload:
    kind: WorkloadKind = "random"
    input_len: int = 128
    output_len: int = 64
    range_ratio: float = 1.0  # lengths drawn uniformly from [len*ratio, len]
    num_prompts: int = 16
    max_concurrency: int = 1
    request_rate: float = float("inf")  # requests/s; inf sends as fast as concurrency allows
    seed: int = 1
    ignore_eos: bool = True  # sent only where the engine accepts it
    path: str | None = None  # kind = "file": JSONL or ShareGPT-style JSON
    warmup: int = 2  # requests at the measured concurrency before each round, discarded
    request_timeout_s: float = 300.0
    # "token_ids": each prompt sent as the client tokenizer's ids (exactly input_len of
    # them), where the engine takes them; "text": the server tokenizes it
    prompt_form: PromptForm = "text"


@dataclass(frozen=True, kw_only=True)
class LoadPoint:
    """A further load measured in every launch after the headline workload, on the same
    server (a server start costs far more than a workload): `[[bench.points]]`, the
    headline's workload with some of its keys overridden (e.g. max_concurrency = 32)."""

    name: str
    workload: Workload
    metric: str = DEFAULT_HEADLINE  # what the report compares at this point


MAX_ROUNDS = 1000  # measured rounds of one workload in one launch, min_duration_s included


@dataclass(frozen=True, kw_only=True)
class Bench:
    engine: EngineName = DEFAULT_ENGINE
    model: str = ""
    url: str | None = None  # engine = "external"
    server_args: tuple[str, ...] = ()
    launches: int = 1  # server launches per cell (the unit of repetition); adaptive: the most
    # adaptive launches (`launches = {min, max}`): at least this many, then one more cycle
    # at a time until every cell is decided or `launches` is reached; None: fixed
    min_launches: int | None = None
    rounds: int = 3  # measured rounds per launch (at least: min_duration_s)
    # discarded launches per cell before the measured ones (a machine's first launch
    # runs with cold caches: page cache, GPU clocks, compile caches)
    warmup_launches: int = 0
    # with no warm-up launches per cell: one discarded launch, of the first cell to run,
    # on each host the bench runs on (its first launch, which pays for the machine's
    # cold caches: 12% slow on an H200, its server ready in 165 s against 56-78 s later)
    host_warmup: bool = True
    ready_timeout_s: float = 600.0
    tokenizer: str | None = None
    workload: Workload = field(default_factory=Workload)
    points: tuple[LoadPoint, ...] = ()
    # worker processes of the client (docs/bench.md): 1 runs it in-process
    client_workers: int | Literal["auto"] = 1
    # warm-up batches before the headline's first round of each launch until the server
    # is steady (bench/_steady.py): a fixed count of warm-up requests is no proof of a
    # warm server. false: only the workload's fixed warm-up, as before the key existed.
    steady_warmup: bool = True
    warmup_max_batches: int = 8
    steady_tolerance: float = 0.05  # relative change of median TPOT between two batches
    # more headline rounds until the measured ones last this long (0: off); a launch
    # measured in 2 s is dominated by noise
    min_duration_s: float = 0.0
    # empty the server's prefix cache before every measured round's warm-up: the rounds
    # replay the same prompts, and the engine would serve rounds 2.. from its cache.
    # false: as before the key existed (docs/bench.md, "Prefix cache")
    flush_cache: bool = True


@dataclass(frozen=True, kw_only=True)
class SloBound:
    """One bound of `[report] slo` (`ttft_p99_ms = 2000`): the load's `percentile`-th
    percentile of a latency within `ms`; each request is held to `ms` itself (goodput)."""

    kind: SloKind
    percentile: int  # 50, 90 or 99
    ms: float

    @property
    def key(self) -> str:
        return f"{self.kind}_p{self.percentile}_ms"


@dataclass(frozen=True, kw_only=True)
class ReportPolicy:
    headline: str = DEFAULT_HEADLINE
    confidence: float = 0.95
    min_effect: float = 0.02  # the equivalence margin: changes within +-min_effect are "equivalent"
    fail_on: tuple[str, ...] = ()  # of FAIL_ON: "incompatible", "regression", "failed", ...
    explain: bool = False  # `run` explains every slower or faster cell (stackmatrix explain)
    explain_rounds: int = 4  # at most this many measuring rounds per explained cell
    # with explain: only these cells, when slower or faster (empty: every such cell)
    explain_cells: tuple[str, ...] = ()
    # the service-level objective goodput and the frontier are judged by (report only:
    # no cell's inputs); empty: none
    slo: tuple[SloBound, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Executor:
    """Where the launches run (`[executor]`; docs/executors.md): on this host, or as
    Slurm jobs, one per block of launches (a cycle of the schedule) on one node."""

    kind: ExecutorKind = "local"
    partition: str | None = None
    account: str | None = None
    gpus: int = 0  # GPUs each job asks for (every cell of a block runs on them in turn)
    cpus: int | None = None  # CPUs per job (None: the partition's default)
    time_limit: str | None = None  # sbatch --time: "MM", "HH:MM:SS", "D-HH:MM"
    constraint: str | None = None  # node features (sbatch --constraint)
    nodelist: str | None = None  # these nodes only (sbatch --nodelist)
    container_image: str | None = None  # pyxis/enroot: srun --container-image
    container_mounts: tuple[str, ...] = ()  # pyxis: srun --container-mounts
    poll_s: float = 5.0  # how often the submitting host asks Slurm about its jobs


@dataclass(frozen=True, kw_only=True)
class Spec:
    name: str
    path: str  # where it was read from
    baseline: str
    cells: tuple[Cell, ...]
    targets: tuple[str, ...] = ()  # "sm_120", "sm_90a"...
    driver: str | None = None  # the fleet's driver version, when not this host's
    description: str = ""
    bench: Bench | None = None
    report: ReportPolicy = field(default_factory=ReportPolicy)
    order: Order = "balanced"
    order_seed: int | None = None  # None: drawn at the first bench and recorded
    executor: Executor = field(default_factory=Executor)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)

    @property
    def baseline_cell(self) -> Cell:
        return self.cell(self.baseline)


def warmup_advice(bench: Bench | None) -> list[str]:
    """A warm-up smaller than the measured concurrency never fills the measured batch: the
    first use of larger batch shapes (kernel compilation, autotuning, graph capture on
    demand) then lands in the measured round. Seen on the H200: a baseline's TTFT at 16
    streams was 478 and 496 ms in its first two launches and 108 ms in the third."""
    if bench is None:
        return []
    loads = [("bench.workload", bench.workload)]
    loads += [(f"bench.points {p.name!r}", p.workload) for p in bench.points]
    return [
        f"WARNING: {where}: warmup = {w.warmup} request(s) at max_concurrency = "
        f"{w.max_concurrency} never fills the measured batch; first-use compilation of "
        f"larger batches lands in the measured round (use warmup >= {w.max_concurrency})"
        for where, w in loads
        if 0 < w.warmup < min(w.max_concurrency, w.num_prompts)
    ]
