//! `raise_open_files_limit` lifts the soft limit on open files to the hard one. In a test
//! binary of its own: the limit is the whole process's, and no other test may run while it
//! is lowered.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

#[test]
fn a_soft_limit_below_the_hard_one_is_lifted_to_it_and_one_at_it_stays() {
    let start = getrlimit(Resource::Nofile);
    let hard = start
        .maximum
        .expect("Linux bounds the open files' hard limit");
    assert!(
        hard > 64,
        "a hard limit of {hard} leaves this test nothing to lift"
    );
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(64),
            maximum: Some(hard),
        },
    )
    .expect("lower the soft limit");

    rojos_server::raise_open_files_limit().expect("raise");
    let raised = getrlimit(Resource::Nofile);
    assert_eq!(raised.current, Some(hard), "lifted to the hard limit");
    assert_eq!(raised.maximum, Some(hard), "the hard limit is kept");

    rojos_server::raise_open_files_limit().expect("raise again");
    assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
}
