//! [`Answers`]: what `rojos init` writes the file for, from flags or asked on a terminal.

use rojos_llm::ProviderKind;

/// What the file is written for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answers {
    /// The provider's kind.
    pub(super) kind: ProviderKind,
    /// The model, when not the kind's.
    pub(super) model: Option<String>,
    /// The base URL, when not the kind's.
    pub(super) base_url: Option<String>,
    /// The key's variable, when not the kind's.
    pub(super) api_key_env: Option<String>,
}
