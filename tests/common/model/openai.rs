//! The OpenAI Responses wire format (`POST /v1/responses`, streamed), as Codex CLI speaks
//! it: its `input` items read into the Messages shape, and a [`Reply`] written back as
//! Responses events. A tool call is Codex's `exec_command` function.

use serde_json::{Value, json};

use super::{Reply, header, usage_tokens, uuid_ish};

/// The request as `{model, tools, messages}` in the Messages shape: user messages'
/// `input_text`, `function_call_output` items as tool results; developer and system
/// messages left out.
pub fn to_messages(v: &Value) -> Value {
    let mut msgs = Vec::new();
    let items = match &v["input"] {
        Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    for it in &items {
        match (it["type"].as_str(), it["role"].as_str()) {
            (Some("message") | None, Some("user")) => {
                let text = match &it["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                msgs.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
            }
            (Some("message") | None, Some("assistant")) | (Some("function_call"), _) => {
                msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": ""}]}));
            }
            (Some("function_call_output"), _) => {
                let out = match &it["output"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    o => o["content"].as_str().unwrap_or_default().to_string(),
                };
                msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": it["call_id"], "content": out}]}));
            }
            _ => {}
        }
    }
    json!({"model": v["model"], "tools": v["tools"], "messages": msgs})
}

fn item(reply: &Reply) -> Value {
    let id = uuid_ish();
    match &reply.shell() {
        Reply::Text(t) => json!({
            "type": "message", "id": format!("msg_{id}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        }),
        // A quick command in a plain (non-login) shell: a login shell's profile could reset
        // PATH; the wait is long enough for `task spawn` to finish.
        Reply::Tool(c) => json!({
            "type": "function_call", "id": format!("fc_{id}"), "call_id": format!("call_{id}"),
            "name": "exec_command", "status": "completed",
            "arguments": json!({"cmd": c, "login": false, "yield_time_ms": 30000}).to_string(),
        }),
        Reply::Write { .. } | Reply::Read { .. } => unreachable!("shell() made it a command"),
    }
}

/// The answer as a Responses event stream.
pub fn sse_response(model: &str, reply: &Reply) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let id = format!("resp_{}", uuid_ish());
    let item = item(reply);
    let mut out = String::new();
    let mut ev = |data: Value| {
        out.push_str(&format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or("")
        ));
    };
    ev(
        json!({"type": "response.created", "response": {"id": id, "model": model, "status": "in_progress", "output": []}}),
    );
    let mut added = item.clone();
    if let Some(o) = added.as_object_mut() {
        o.insert("status".into(), json!("in_progress"));
        if reply_is_text(reply) {
            o.insert("content".into(), json!([]));
        } else {
            o.insert("arguments".into(), json!(""));
        }
    }
    ev(json!({"type": "response.output_item.added", "output_index": 0, "item": added}));
    match reply {
        Reply::Text(t) => ev(json!({
            "type": "response.output_text.delta", "output_index": 0, "content_index": 0,
            "item_id": item["id"], "delta": t,
        })),
        Reply::Tool(_) | Reply::Write { .. } | Reply::Read { .. } => ev(json!({
            "type": "response.function_call_arguments.delta", "output_index": 0,
            "item_id": item["id"], "delta": item["arguments"],
        })),
    }
    ev(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    let (i, o) = usage_tokens();
    ev(json!({"type": "response.completed", "response": {
        "id": id, "model": model, "status": "completed", "output": [item],
        "usage": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }}));
    tiny_http::Response::from_data(out.into_bytes())
        .with_header(header("content-type", "text/event-stream"))
        .with_header(header("cache-control", "no-cache"))
}

fn reply_is_text(reply: &Reply) -> bool {
    matches!(reply, Reply::Text(_))
}
