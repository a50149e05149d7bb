//! The integration suite, one binary: the recorded provider streams (`fixtures`), and the
//! client over real HTTP against a scripted upstream on loopback (`http`).

mod fixtures;
mod http;
mod support;
