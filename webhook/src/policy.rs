//! The hook for Sluice's own `PolicyModule` objects: the check itself (compiling the module and checking it against
//! its world) lives elsewhere and is plugged in through [`PolicyModuleValidator`].

use serde_json::Value;

/// Checks a PolicyModule at admission.
pub trait PolicyModuleValidator: Send + Sync + 'static {
    /// Checks `object` (the new PolicyModule; `old` on update): `Ok` with warnings to show, or `Err` with the
    /// message that refuses it.
    fn validate(&self, object: &Value, old: Option<&Value>) -> Result<Vec<String>, String>;
}

/// Any matching closure is a validator.
impl<F> PolicyModuleValidator for F
where
    F: Fn(&Value, Option<&Value>) -> Result<Vec<String>, String> + Send + Sync + 'static,
{
    fn validate(&self, object: &Value, old: Option<&Value>) -> Result<Vec<String>, String> {
        self(object, old)
    }
}
