//! Test support: the fixture table and its checker (`expect`), and a scripted upstream
//! serving real-format bytes over loopback HTTP (`upstream`).

pub(crate) mod expect;
pub(crate) mod upstream;
