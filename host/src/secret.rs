//! `Secret`: API keys and bearer tokens that never show in logs or debug output. It is
//! `rojos_llm`'s type (a provider's API key is one), re-exported here for the host's tokens.

pub use rojos_llm::Secret;
