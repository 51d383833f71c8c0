//! Assembling a streamed completion: SSE `data:` lines of `chat.completion.chunk` objects,
//! content fragments, tool-call fragments joined by index, a usage chunk, `[DONE]`.

use serde_json::Value;

use super::types::{Completion, LlmError, ToolCall, Usage};

/// Splits a byte stream into SSE `data:` payloads, across chunk boundaries.
#[derive(Debug, Default)]
pub(crate) struct SseLines {
    buffer: String,
}

impl SseLines {
    /// Feeds bytes; answers the complete `data:` payloads they finish.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.push_str(&String::from_utf8_lossy(bytes));
        let mut payloads = Vec::new();
        while let Some(end) = self.buffer.find('\n') {
            let line: String = self.buffer.drain(..=end).collect();
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(data) = line.strip_prefix("data:") {
                payloads.push(data.trim_start().to_owned());
            }
        }
        payloads
    }
}

/// Tool calls under construction, by stream index.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    content: String,
    calls: Vec<(u64, ToolCall)>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl Assembler {
    /// Applies one `data:` payload; answers the content fragment it carried, if any.
    ///
    /// Some servers reuse index 0 for parallel calls and tell them apart only by `id`: a new id
    /// at a seen index starts a new call.
    pub(crate) fn apply(&mut self, payload: &str) -> Result<Option<String>, LlmError> {
        if payload == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let chunk: Value = serde_json::from_str(payload)
            .map_err(|e| LlmError::Malformed(format!("stream chunk is not JSON: {e}")))?;
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = serde_json::from_value(usage.clone())
                .map_err(|e| LlmError::Malformed(format!("usage: {e}")))?;
        }
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else {
            return Ok(None);
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            self.apply_tool_fragment(fragment);
        }
        match delta["content"].as_str() {
            Some(text) if !text.is_empty() => {
                self.content.push_str(text);
                Ok(Some(text.to_owned()))
            }
            _ => Ok(None),
        }
    }

    fn apply_tool_fragment(&mut self, fragment: &Value) {
        let index = fragment["index"].as_u64().unwrap_or(0);
        let id = fragment["id"].as_str().filter(|id| !id.is_empty());
        let function = &fragment["function"];
        let existing = self
            .calls
            .iter()
            .rposition(|(i, _)| *i == index)
            .filter(|&at| id.is_none_or(|id| self.calls[at].1.id == id));
        let at = match existing {
            Some(at) => at,
            None => {
                self.calls.push((
                    index,
                    ToolCall::new(
                        id.unwrap_or_default(),
                        function["name"].as_str().unwrap_or_default(),
                        "",
                    ),
                ));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at].1;
        if call.function.name.is_empty()
            && let Some(name) = function["name"].as_str()
        {
            call.function.name = name.to_owned();
        }
        if let Some(piece) = function["arguments"].as_str() {
            call.function.arguments.push_str(piece);
        }
    }

    /// Whether `[DONE]` was seen.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The assembled completion.
    pub(crate) fn finish(self) -> Completion {
        Completion {
            content: self.content,
            tool_calls: self.calls.into_iter().map(|(_, call)| call).collect(),
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_are_found_across_chunk_boundaries() {
        let mut lines = SseLines::default();
        assert!(lines.feed(b"data: {\"a\":").is_empty());
        assert_eq!(
            lines.feed(b"1}\n\n: keep-alive\ndata: [DONE]\n"),
            ["{\"a\":1}", "[DONE]"]
        );
    }

    #[test]
    fn tool_call_fragments_are_joined_by_index() {
        let mut assembler = Assembler::default();
        for payload in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"remember","arguments":"{\"key\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"forget","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            "[DONE]",
        ] {
            assembler.apply(payload).expect("valid");
        }
        assert!(assembler.is_done());
        let completion = assembler.finish();
        assert_eq!(completion.tool_calls.len(), 2);
        assert_eq!(
            completion.tool_calls[0].function.arguments,
            "{\"key\":\"x\"}"
        );
        assert_eq!(completion.tool_calls[1].function.name, "forget");
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(completion.usage.total_tokens, 5);
    }

    #[test]
    fn a_new_id_at_a_seen_index_is_a_new_call() {
        let mut assembler = Assembler::default();
        for payload in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"two","arguments":"{}"}}]}}]}"#,
        ] {
            assembler.apply(payload).expect("valid");
        }
        let names: Vec<_> = assembler
            .finish()
            .tool_calls
            .into_iter()
            .map(|c| c.function.name)
            .collect();
        assert_eq!(names, ["one", "two"]);
    }

    #[test]
    fn content_fragments_are_answered_and_joined() {
        let mut assembler = Assembler::default();
        let first = assembler
            .apply(r#"{"choices":[{"delta":{"content":"Hel"}}]}"#)
            .expect("valid");
        let second = assembler
            .apply(r#"{"choices":[{"delta":{"content":"lo"}}]}"#)
            .expect("valid");
        assert_eq!(
            (first.as_deref(), second.as_deref()),
            (Some("Hel"), Some("lo"))
        );
        assert_eq!(assembler.finish().content, "Hello");
    }

    #[test]
    fn a_chunk_that_is_not_json_is_malformed() {
        assert!(matches!(
            Assembler::default().apply("{\"choices\": ["),
            Err(LlmError::Malformed(_))
        ));
    }
}
