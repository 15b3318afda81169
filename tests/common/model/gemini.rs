//! The Gemini API wire format (`:streamGenerateContent?alt=sse` and `:generateContent`),
//! as Gemini CLI speaks it: `contents` read into the Messages shape, and a [`Reply`]
//! written back as candidates. A tool call is Gemini CLI's `run_shell_command`.

use serde_json::{Value, json};

use super::{Reply, header, usage_tokens};

/// Every string inside `v`, one per line (a function response's output, whatever its shape).
fn strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The request as `{model, tools, messages}` in the Messages shape: a user turn's text
/// parts, its `functionResponse` parts as tool results; model turns as the assistant.
pub fn to_messages(v: &Value) -> Value {
    let mut msgs = Vec::new();
    for c in v["contents"].as_array().into_iter().flatten() {
        let parts = c["parts"].as_array().cloned().unwrap_or_default();
        if c["role"] == "model" {
            msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": ""}]}));
            continue;
        }
        let mut blocks = Vec::new();
        for p in &parts {
            if let Some(t) = p["text"].as_str() {
                blocks.push(json!({"type": "text", "text": t}));
            } else if p.get("functionResponse").is_some() {
                let mut out = String::new();
                strings(&p["functionResponse"]["response"], &mut out);
                blocks.push(json!({"type": "tool_result", "tool_use_id": "x", "content": out}));
            }
        }
        msgs.push(json!({"role": "user", "content": blocks}));
    }
    let tools: Vec<Value> = v["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .flat_map(|x| x["functionDeclarations"].as_array().cloned().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    json!({"model": "gemini-scripted", "tools": tools, "messages": msgs})
}

/// One `GenerateContentResponse`.
pub fn response_json(reply: &Reply) -> Value {
    let part = match &reply.shell() {
        Reply::Text(t) => json!({"text": t}),
        Reply::Tool(c) => json!({"functionCall": {
            "name": "run_shell_command",
            "args": {"command": c, "description": "Run the protocol command"},
        }}),
        Reply::Write { .. } | Reply::Read { .. } => unreachable!("shell() made it a command"),
    };
    let (i, o) = usage_tokens();
    json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": i, "candidatesTokenCount": o, "totalTokenCount": i + o},
        "modelVersion": "gemini-scripted",
    })
}

/// The answer as one server-sent event.
pub fn sse_response(reply: &Reply) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_data(format!("data: {}\n\n", response_json(reply)).into_bytes())
        .with_header(header("content-type", "text/event-stream"))
        .with_header(header("cache-control", "no-cache"))
}
