//! openhands: NOT YET WRITTEN (a placeholder while its reader is being written; it fits nothing).

use serde_json::Value;

use super::ImportError;
use super::conversation::Conversation;

pub fn fits(_v: &Value) -> Result<(), ImportError> {
    Err(ImportError::at("", "openhands (reader not written yet)"))
}

pub fn conversations(v: &Value, _id: &str) -> Result<Vec<Conversation>, ImportError> {
    fits(v)?;
    Ok(Vec::new())
}
