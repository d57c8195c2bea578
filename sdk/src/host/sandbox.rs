//! The per-instance store: locked-down WASI context, memory limiter, deadline and failure classes.

use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use super::{EPOCH_TICK, Shared};
use crate::policy::{PolicyError, PolicyFailure};

/// Caps linear memory growth and remembers whether it refused one (to class the trap).
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_limit: usize,
    pub(crate) refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.refused = true;
            // An error traps the guest at the `memory.grow` instead of returning -1 to it, so a
            // module cannot spin on refused growth.
            return Err(wasmtime::format_err!(
                "memory cap of {} bytes reached (asked for {desired})",
                self.memory_limit
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// A clock that always reads zero: modules get no time source.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Host state of one instance.
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    stderr: MemoryOutputPipe,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Builds a store for one instance: empty WASI context, memory cap, epoch deadline traps.
pub(crate) fn new_store(shared: &Shared, memory_limit: usize) -> Store<StoreState> {
    let out = shared.config.output_limit;
    let stderr = MemoryOutputPipe::new(out);
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(MemoryOutputPipe::new(out))
        .stderr(stderr.clone())
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let state = StoreState {
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: Limiter {
            memory_limit,
            refused: false,
        },
        stderr,
    };
    let mut store = Store::new(&shared.engine, state);
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_trap();
    store
}

/// The least time instantiation and `init` get, whatever the module's call deadline: they run once per instance,
/// outside any scheduling decision, and a module's deadline (5 ms by default) is sized for its calls. Under it, a
/// sound module was refused by `sluice policy push` and the webhook on a busy machine (seen on the local control
/// plane: "init ... ran past its deadline of 5ms").
pub(crate) const INIT_DEADLINE_FLOOR: Duration = Duration::from_secs(1);

/// The deadline of instantiation and `init` for a module whose calls have `deadline`.
pub(crate) fn init_deadline(deadline: Duration) -> Duration {
    deadline.max(INIT_DEADLINE_FLOOR)
}

/// Ticks of the epoch that make up `deadline` (one more, as the current tick is partly gone).
fn ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos() / EPOCH_TICK.as_nanos()).max(1) as u64 + 1
}

/// Runs `f` under the deadline and turns a wasmtime error into a classed [`PolicyError`].
pub(crate) fn guarded<R>(
    store: &mut Store<StoreState>,
    policy: &str,
    deadline: Duration,
    f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<R>,
) -> Result<R, PolicyError> {
    store.set_epoch_deadline(ticks(deadline));
    store.data_mut().limiter.refused = false;
    f(store).map_err(|e| classify(store, policy, deadline, &e))
}

fn classify(
    store: &Store<StoreState>,
    policy: &str,
    deadline: Duration,
    e: &wasmtime::Error,
) -> PolicyError {
    let state = store.data();
    let stderr = String::from_utf8_lossy(&state.stderr.contents())
        .trim()
        .to_string();
    let tail = if stderr.is_empty() {
        String::new()
    } else {
        // The last lines carry a Rust panic message.
        let s: String = stderr
            .chars()
            .rev()
            .take(400)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("; module stderr: {s}")
    };
    if state.limiter.refused {
        return PolicyError::new(
            policy,
            PolicyFailure::Memory,
            format!(
                "exceeded its memory cap of {} bytes{tail}",
                state.limiter.memory_limit
            ),
        );
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => PolicyError::new(
            policy,
            PolicyFailure::Deadline,
            format!("ran past its deadline of {deadline:?}"),
        ),
        Some(t) => PolicyError::new(policy, PolicyFailure::Trap, format!("trapped: {t}{tail}")),
        None => PolicyError::new(policy, PolicyFailure::Trap, format!("failed: {e:#}{tail}")),
    }
}
