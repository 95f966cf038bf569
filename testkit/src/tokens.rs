//! Tokens an assistant pays for what the MCP server sends, counted with o200k_base (the
//! public BPE closest to what assistants count) over the compact JSON as it is sent: the
//! budgets of BENCHMARKS.md ("Tokens an assistant pays") and the test that holds
//! `tools/list` to its own.

use serde_json::Value;

/// The tokens of `value` as it is sent.
pub fn of(bpe: &tiktoken_rs::CoreBPE, value: &Value) -> usize {
    bpe.encode_with_special_tokens(&value.to_string()).len()
}

/// The o200k_base encoder. Making one takes milliseconds: a caller counting many values makes
/// it once.
pub fn encoder() -> anyhow::Result<tiktoken_rs::CoreBPE> {
    tiktoken_rs::o200k_base()
}
