//! What the three world hosts share: the module's instance, rebuilt (with `init`) when a call
//! leaves it unsound, and the calls into it under the module's deadline.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::sandbox::{StoreState, guarded, init_deadline, new_store};
use super::{Compiled, LoadError, ModuleKind, Shared, hex};
use crate::policy::{PolicyError, PolicyFailure};

/// A world's generated bindings, as far as instantiating them and running `init` goes.
pub(crate) trait World: Sized {
    /// The world (names it in [`LoadError::WorldMismatch`]).
    const KIND: ModuleKind;
    /// The world's `…Pre`: a linked component checked against the world.
    type Pre;
    /// What `init` answers when it accepts its configuration.
    type Info;
    /// What a world keeps beside its instance; starts afresh with each instance.
    type Resident: Default;

    /// Checks the linked component against the world.
    fn pre(pre: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre>;
    /// Instantiates the component in `store`.
    fn instantiate(pre: &Self::Pre, store: &mut Store<StoreState>) -> wasmtime::Result<Self>;
    /// Calls the module's `init`.
    fn init(
        &self,
        store: &mut Store<StoreState>,
        config: &str,
    ) -> wasmtime::Result<Result<Self::Info, String>>;
}

/// Implements [`World`] for the bindings bindgen generated for a world: `bindings` and `pre` (its
/// `…Pre`) name them, `kind` the [`ModuleKind`], `init` what `init` answers on success and
/// `resident` what an instance keeps beside it.
macro_rules! world {
    (
        kind: $kind:ident,
        bindings: $bindings:ident,
        pre: $pre:ident,
        init: $info:ty,
        resident: $resident:ty $(,)?
    ) => {
        impl $crate::host::instance::World for $bindings {
            const KIND: $crate::host::ModuleKind = $crate::host::ModuleKind::$kind;
            type Pre = $pre<$crate::host::sandbox::StoreState>;
            type Info = $info;
            type Resident = $resident;

            fn pre(
                pre: ::wasmtime::component::InstancePre<$crate::host::sandbox::StoreState>,
            ) -> ::wasmtime::Result<Self::Pre> {
                $pre::new(pre)
            }

            fn instantiate(
                pre: &Self::Pre,
                store: &mut ::wasmtime::Store<$crate::host::sandbox::StoreState>,
            ) -> ::wasmtime::Result<Self> {
                pre.instantiate(store)
            }

            fn init(
                &self,
                store: &mut ::wasmtime::Store<$crate::host::sandbox::StoreState>,
                config: &str,
            ) -> ::wasmtime::Result<Result<$info, String>> {
                self.call_init(store, config)
            }
        }
    };
}
pub(crate) use world;

/// A live instance and what it holds resident.
pub(crate) struct Live<W: World> {
    pub(crate) store: Store<StoreState>,
    pub(crate) bindings: W,
    pub(crate) resident: W::Resident,
}

/// A loaded module of world `W`. Calls are serialised (one instance per module); an instance that
/// failed is discarded and rebuilt (with `init`) on the next call.
pub(crate) struct Module<W: World> {
    pub(crate) name: String,
    shared: Arc<Shared>,
    compiled: Arc<Compiled>,
    pre: W::Pre,
    config: String,
    pub(crate) deadline: Duration,
    pub(crate) memory_limit: usize,
    live: Mutex<Option<Live<W>>>,
}

impl<W: World> Module<W> {
    /// Checks the world, instantiates and runs `init`; returns the module and what `init` answered.
    pub(crate) fn new(
        shared: Arc<Shared>,
        compiled: Arc<Compiled>,
        name: &str,
        config: &str,
        deadline: Duration,
        memory_limit: usize,
    ) -> Result<(Self, W::Info), LoadError> {
        let pre = W::pre(compiled.pre.clone()).map_err(|e| LoadError::WorldMismatch {
            kind: W::KIND.world(),
            message: format!("{e:#}"),
        })?;
        let me = Self {
            name: name.to_string(),
            shared,
            compiled,
            pre,
            config: config.to_string(),
            deadline,
            memory_limit,
            live: Mutex::new(None),
        };
        let (live, info) = me.instantiate().map_err(|e| match e.failure {
            PolicyFailure::Rejected => LoadError::InitRejected(e.message),
            _ => LoadError::InitRejected(e.to_string()),
        })?;
        *me.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
        Ok((me, info))
    }

    /// Lower-case hex sha256 of the module bytes.
    pub(crate) fn sha256(&self) -> String {
        hex(&self.compiled.sha256)
    }

    /// A fresh instance with `init` run (instantiation and `init` get at least
    /// [`INIT_DEADLINE_FLOOR`](super::sandbox::INIT_DEADLINE_FLOOR), whatever the call deadline).
    pub(crate) fn instantiate(&self) -> Result<(Live<W>, W::Info), PolicyError> {
        let mut store = new_store(&self.shared, self.memory_limit);
        let bindings = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            W::instantiate(&self.pre, s)
        })?;
        let config = self.config.clone();
        let info = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            bindings.init(s, &config)
        })?
        .map_err(|m| self.rejected(m))?;
        let live = Live {
            store,
            bindings,
            resident: W::Resident::default(),
        };
        Ok((live, info))
    }

    /// Runs `f` on the module's instance (built first if there is none). The instance is kept
    /// unless `f` failed otherwise than with a malformed or refused answer.
    pub(crate) fn with_live<R>(
        &self,
        f: impl FnOnce(&mut Live<W>) -> Result<R, PolicyError>,
    ) -> Result<R, PolicyError> {
        let mut slot = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = match slot.take() {
            Some(l) => l,
            None => self.instantiate()?.0,
        };
        let r = f(&mut live);
        // A module that trapped may be mid-update; malformed or refused answers leave it sound.
        let keep = match &r {
            Ok(_) => true,
            Err(e) => matches!(
                e.failure,
                PolicyFailure::Malformed | PolicyFailure::Rejected
            ),
        };
        if keep {
            *slot = Some(live);
        }
        r
    }

    /// Calls an export (`f`, given `store`) under the call deadline; an `Err` it answers is a
    /// refusal.
    pub(crate) fn call<R>(
        &self,
        store: &mut Store<StoreState>,
        f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<Result<R, String>>,
    ) -> Result<R, PolicyError> {
        self.guarded(store, f)?.map_err(|m| self.rejected(m))
    }

    /// Calls an export that answers no `result` (`f`, given `store`) under the call deadline.
    pub(crate) fn guarded<R>(
        &self,
        store: &mut Store<StoreState>,
        f: impl FnOnce(&mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<R, PolicyError> {
        guarded(store, &self.name, self.deadline, f)
    }

    /// The error of a module that refused, saying why in `message`.
    fn rejected(&self, message: String) -> PolicyError {
        PolicyError::new(&self.name, PolicyFailure::Rejected, message)
    }
}
