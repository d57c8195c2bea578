//! The wasmtime host that runs policy modules (WebAssembly components) in a sandbox.
//!
//! * Compiled once per sha256 of the module bytes, instantiated from an `InstancePre` with the
//!   pooling allocator; precompiled native code (`.cwasm`) is never accepted.
//! * Every call runs under an epoch deadline (a ticker thread advances the epoch every
//!   millisecond), a memory cap, a stack cap, and an empty WASI context: no preopens, no
//!   environment, no sockets, frozen clocks, bounded stdout/stderr.
//! * Components that import anything beyond the WASI interfaces Rust's std needs are rejected
//!   when loaded, naming the import.
//! * A failed call becomes a [`PolicyError`](crate::policy::PolicyError) classed as trap,
//!   deadline, memory, malformed or rejected; the instance is then discarded and rebuilt on the
//!   next call.

mod fairness;
mod instance;
mod load;
mod placement;
mod placement_legacy;
mod preemption_cost;
mod sandbox;
#[cfg(feature = "api")]
pub mod validate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use thiserror::Error;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use fairness::WasmFairness;
use instance::{Module, World};
pub use load::{ALLOWED_IMPORT_PREFIXES, CONTRACT_VERSION, OLDER_CONTRACT_VERSIONS};
pub use placement::{StateSends, WasmPlacement};
pub use preemption_cost::WasmPreemptionCostPolicy;
use sandbox::StoreState;

/// The world a module implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    /// `sluice:policy/placement`.
    Placement,
    /// `sluice:policy/fairness`.
    Fairness,
    /// `sluice:policy/preemption-cost` (written `preemptioncost`, as `PolicyModule.spec.kind` is).
    #[serde(alias = "preemption-cost")]
    PreemptionCost,
}

impl ModuleKind {
    /// Every kind.
    pub const ALL: [ModuleKind; 3] = [Self::Placement, Self::Fairness, Self::PreemptionCost];

    /// Lower-case name, as `PolicyModule.spec.kind` and the case files spell it (`placement`,
    /// `fairness`, `preemptioncost`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placement => "placement",
            Self::Fairness => "fairness",
            Self::PreemptionCost => "preemptioncost",
        }
    }

    /// Name of the WIT world in `sluice:policy` (`placement`, `fairness`, `preemption-cost`).
    pub fn world(self) -> &'static str {
        match self {
            Self::Placement => "placement",
            Self::Fairness => "fairness",
            Self::PreemptionCost => "preemption-cost",
        }
    }
}

impl std::str::FromStr for ModuleKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // The world's own name is accepted too: it is what a module author knows the world by.
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s || k.world() == s)
            .ok_or_else(|| format!("kind must be placement, fairness or preemptioncost, not {s:?}"))
    }
}

/// Host-wide settings.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Deadline of a call when the module sets none.
    pub default_deadline: Duration,
    /// Memory cap of an instance when the module sets none, in bytes.
    pub default_memory_limit: usize,
    /// Largest memory cap a module may ask for, in bytes (sizes the pooling allocator's slots).
    pub max_memory_limit: usize,
    /// WebAssembly stack cap, in bytes.
    pub max_wasm_stack: usize,
    /// Instances (and memories) the pooling allocator holds at once.
    pub pool_instances: u32,
    /// Bytes a module may write to stdout and to stderr per instance.
    pub output_limit: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            default_deadline: Duration::from_millis(5),
            default_memory_limit: 64 << 20,
            max_memory_limit: 512 << 20,
            max_wasm_stack: 512 << 10,
            pool_instances: 64,
            output_limit: 16 << 10,
        }
    }
}

/// Per-module overrides of the host's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModuleLimits {
    /// Deadline of one call.
    pub deadline: Option<Duration>,
    /// Memory cap in bytes.
    pub memory_limit: Option<usize>,
}

/// Why a module could not be loaded.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LoadError {
    /// The bytes are precompiled native code, which is never loaded.
    #[error(
        "the module is precompiled native code (.cwasm); only WebAssembly component bytes are accepted"
    )]
    Precompiled,
    /// The bytes are not a WebAssembly component.
    #[error("the module does not compile: {0}")]
    Compile(String),
    /// The component imports something the sandbox does not grant.
    #[error(
        "the module imports {0:?}, which policies may not use (allowed: WASI cli, io, clocks, filesystem, random; all empty)"
    )]
    ForbiddenImport(String),
    /// The component was built against another version of the contract.
    #[error(
        "the module was built against {0}, but this host implements sluice:policy@{CONTRACT_VERSION} (and still loads 0.1.0): rebuild it with the current sluice-sdk"
    )]
    OtherContract(String),
    /// The component does not implement the expected world.
    #[error("the module does not implement the sluice:policy/{kind} world: {message}")]
    WorldMismatch {
        /// Expected world.
        kind: &'static str,
        /// What is missing or mistyped.
        message: String,
    },
    /// `init` refused the configuration, or failed.
    #[error("the module's init refused its configuration: {0}")]
    InitRejected(String),
    /// A limit is out of range.
    #[error("{0}")]
    Limits(String),
    /// The host could not be set up.
    #[error("the WebAssembly host could not start: {0}")]
    Host(String),
}

/// A compiled module, shared by every instance of the same bytes.
pub(crate) struct Compiled {
    /// sha256 of the module bytes.
    pub(crate) sha256: [u8; 32],
    /// Linked, ready to instantiate.
    pub(crate) pre: InstancePre<StoreState>,
    /// The `sluice:policy` version its imports carry (None: it imports none of the contract's interfaces).
    pub(crate) contract: Option<String>,
}

/// What every module handle keeps of the host.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreState>,
    pub(crate) config: HostConfig,
    cache: Mutex<HashMap<[u8; 32], Arc<Compiled>>>,
}

/// The WebAssembly policy host: one wasmtime engine, its epoch ticker and the compiled-module cache.
#[derive(Clone)]
pub struct PolicyHost {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PolicyHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHost")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// How often the epoch advances: the resolution of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

impl PolicyHost {
    /// Starts a host: configures wasmtime (Component Model, pooling allocator, epoch interruption,
    /// stack cap) and the epoch ticker thread.
    pub fn new(config: HostConfig) -> Result<Self, LoadError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(config.pool_instances)
            .total_core_instances(config.pool_instances * 2)
            .total_memories(config.pool_instances)
            .total_tables(config.pool_instances * 2)
            .max_memory_size(config.max_memory_limit);
        let mut wt = Config::new();
        wt.wasm_component_model(true)
            .epoch_interruption(true)
            // Pool slots never move: saying so lets Cranelift hoist the heap base out of loops.
            .memory_may_move(false)
            .max_wasm_stack(config.max_wasm_stack)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wt).map_err(|e| LoadError::Host(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| LoadError::Host(format!("{e:#}")))?;
        for name in load::TYPE_INTERFACES {
            linker
                .instance(name)
                .map_err(|e| LoadError::Host(format!("{name}: {e:#}")))?;
        }
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("sluice-policy-epoch".into())
            .spawn(move || {
                // Ends when the engine (the host and every module) is gone.
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| LoadError::Host(format!("epoch ticker: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                engine,
                linker,
                config,
                cache: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &HostConfig {
        &self.shared.config
    }

    /// Compiles `bytes` (or returns the cached compilation of the same sha256) after checking
    /// its imports.
    pub(crate) fn compile(&self, bytes: &[u8]) -> Result<Arc<Compiled>, LoadError> {
        let sha = sha256(bytes);
        let cache = self.shared.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(&sha) {
            return Ok(c.clone());
        }
        drop(cache);
        load::check_bytes(bytes)?;
        let component = Component::new(&self.shared.engine, bytes)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let contract = load::check_imports(&self.shared.engine, &component)?;
        let pre = self
            .shared
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let compiled = Arc::new(Compiled {
            sha256: sha,
            pre,
            contract,
        });
        self.shared
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sha, compiled.clone());
        Ok(compiled)
    }

    /// Number of distinct modules compiled so far.
    pub fn compiled_modules(&self) -> usize {
        self.shared
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Forgets the compilation of a module (e.g. when its PolicyModule is deleted).
    pub fn evict(&self, sha256_hex: &str) {
        self.shared
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| hex(k) != sha256_hex);
    }

    fn resolve_limits(&self, limits: ModuleLimits) -> Result<(Duration, usize), LoadError> {
        let c = &self.shared.config;
        let deadline = limits.deadline.unwrap_or(c.default_deadline);
        let memory = limits.memory_limit.unwrap_or(c.default_memory_limit);
        if deadline.is_zero() || deadline > Duration::from_secs(10) {
            return Err(LoadError::Limits(format!(
                "deadline {deadline:?} is out of range (1 ms to 10 s)"
            )));
        }
        if memory < (1 << 16) || memory > c.max_memory_limit {
            return Err(LoadError::Limits(format!(
                "memory limit {memory} bytes is out of range (64 KiB to {} bytes)",
                c.max_memory_limit
            )));
        }
        Ok((deadline, memory))
    }

    /// Resolves the limits, compiles (cached), checks the world, instantiates and runs `init`.
    fn load<W: World>(
        &self,
        name: &str,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<(Module<W>, W::Info), LoadError> {
        let (deadline, memory) = self.resolve_limits(limits)?;
        let compiled = self.compile(bytes)?;
        self.load_compiled(compiled, name, config, deadline, memory)
    }

    fn load_compiled<W: World>(
        &self,
        compiled: Arc<Compiled>,
        name: &str,
        config: &str,
        deadline: Duration,
        memory: usize,
    ) -> Result<(Module<W>, W::Info), LoadError> {
        Module::new(
            self.shared.clone(),
            compiled,
            name,
            config,
            deadline,
            memory,
        )
    }

    /// Loads a placement module (of this contract or of 0.1.0): compiles (cached), checks the world,
    /// instantiates and runs `init`.
    pub fn load_placement(
        &self,
        name: &str,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<WasmPlacement, LoadError> {
        let (deadline, memory) = self.resolve_limits(limits)?;
        let compiled = self.compile(bytes)?;
        if compiled.contract.as_deref() == Some("0.1.0") {
            let (module, ()) = self.load_compiled(compiled, name, config, deadline, memory)?;
            return Ok(WasmPlacement::legacy(module));
        }
        let (module, ()) = self.load_compiled(compiled, name, config, deadline, memory)?;
        Ok(WasmPlacement::new(module))
    }

    /// Loads a fairness module: compiles (cached), checks the world, instantiates and runs `init`.
    pub fn load_fairness(
        &self,
        name: &str,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<WasmFairness, LoadError> {
        let (module, info) = self.load(name, bytes, config, limits)?;
        WasmFairness::new(module, info)
    }

    /// Loads a preemption-cost module: compiles (cached), checks the world, instantiates and runs `init`.
    pub fn load_preemption_cost(
        &self,
        name: &str,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<WasmPreemptionCostPolicy, LoadError> {
        let (module, ()) = self.load(name, bytes, config, limits)?;
        Ok(WasmPreemptionCostPolicy::new(module))
    }

    /// Validates a module of `kind`: compiles it, checks its imports and world, runs `init`.
    pub fn validate(
        &self,
        kind: ModuleKind,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<(), LoadError> {
        match kind {
            ModuleKind::Placement => self
                .load_placement("validate", bytes, config, limits)
                .map(drop),
            ModuleKind::Fairness => self
                .load_fairness("validate", bytes, config, limits)
                .map(drop),
            ModuleKind::PreemptionCost => self
                .load_preemption_cost("validate", bytes, config, limits)
                .map(drop),
        }
    }
}

/// sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lower-case hex of a digest.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Lower-case hex sha256 of `bytes`, as written in a PolicyModule.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&sha256(bytes))
}
