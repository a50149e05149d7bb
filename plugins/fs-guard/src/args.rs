//! Parsing the model's arguments for a tool: a JSON object, nothing else. The function is
//! `rojos_plugin_api::parse_args`, re-exported; its tests against every malformed argument a
//! model may send live here, next to the file tools that rely on it.

/// The model's arguments, as a JSON object only (re-exported from `rojos-plugin-api`).
pub use rojos_plugin_api::parse_args;

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_plugin_api::ErrorKind;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct PathArgs {
        path: String,
    }

    #[test]
    fn every_malformed_argument_gives_an_invalid_arguments_error_saying_what_is_wrong() {
        for (args, expected) in crate::testing::bad_path_arguments() {
            let error = parse_args::<PathArgs>(&args).expect_err(&args);
            assert_eq!(error.kind, ErrorKind::INVALID_ARGUMENTS, "{args}");
            assert!(
                error.message.starts_with("invalid arguments: ")
                    && error.message.contains(expected),
                "{args:.80}: {}",
                error.message
            );
        }
    }

    #[test]
    fn an_object_with_whitespace_around_it_is_parsed() {
        let args: PathArgs = parse_args(" \n{\"path\": \"a.txt\"}\n").unwrap();
        assert_eq!(args.path, "a.txt");
    }
}
