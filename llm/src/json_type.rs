//! The JSON type of a value, named for a message ("an array"): the model's tool arguments
//! are checked here and in the host, and both say what they got in the same words.

use serde_json::Value;

/// The type of `value` with its article, for messages: "null", "a boolean", "a number",
/// "a string", "an array" or "an object".
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
