//! `ao-bench usage [--agents N] [--mb N] [--runs N]`: reading token usage from Claude
//! Code transcripts — N agents with a transcript of M MB each (Claude Code's shape:
//! prompts and tool results between answers, each answer written as two lines with one
//! message id). The first read, then the incremental update after one new answer per
//! agent (target: under 10 ms per agent), beside floors measured in the same run: the
//! raw read of the same bytes, and a full re-read (what the update would cost without
//! the saved offset).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_orchestrator::core::cost::usage::{Transcript, sum};
use agent_orchestrator::store::usage::read_new;

use crate::{arg, header, row, stats};

/// One answer as Claude Code writes it: a text block and a tool call, one id.
fn answer(n: usize) -> String {
    let usage = "\"usage\":{\"input_tokens\":600,\"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":100,\"output_tokens\":100,\"service_tier\":\"standard\"}";
    let head = format!(
        "{{\"parentUuid\":\"p-{n}\",\"isSidechain\":false,\"type\":\"assistant\",\"uuid\":\"u-{n}\",\"timestamp\":\"2026-11-23T09:00:00.000Z\",\"requestId\":\"req_{n}\",\"message\":{{\"id\":\"msg_{n:020}\",\"model\":\"claude-sonnet-4-5\",\"role\":\"assistant\",\"type\":\"message\","
    );
    format!(
        "{head}\"content\":[{{\"type\":\"text\",\"text\":\"Running the next step of the plan.\"}}],{usage}}}}}\n\
         {head}\"content\":[{{\"type\":\"tool_use\",\"id\":\"toolu_{n}\",\"name\":\"Bash\",\"input\":{{\"command\":\"cargo test -p module_{n}\"}}}}],{usage}}}}}\n"
    )
}

/// A tool result between answers: most of a transcript's bytes.
fn tool_result(n: usize) -> String {
    format!(
        "{{\"parentUuid\":\"u-{n}\",\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_{n}\",\"content\":\"{}\"}}]}}}}\n",
        "test result: ok. 42 passed; 0 failed\\n".repeat(40)
    )
}

/// Write a transcript of about `bytes`; returns the answers in it.
fn generate(p: &Path, bytes: usize) -> usize {
    let mut f = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
    let (mut n, mut written) = (0, 0);
    while written < bytes {
        let chunk = answer(n) + &tool_result(n);
        f.write_all(chunk.as_bytes()).unwrap();
        written += chunk.len();
        n += 1;
    }
    n
}

pub(crate) fn bench_usage(args: &[String]) {
    let agents = arg(args, "--agents", 20);
    let mb = arg(args, "--mb", 10);
    let runs = arg(args, "--runs", 5);
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..agents)
        .map(|i| dir.path().join(format!("agent-{i}.jsonl")))
        .collect();
    let mut expect = 0;
    for f in &files {
        expect = generate(f, mb << 20);
    }
    println!(
        "usage: {agents} transcripts of {mb} MB ({expect} answers each), {runs} runs; times are for all {agents} agents"
    );
    // Floor for the first read: the bytes alone.
    let raw: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for f in &files {
                std::hint::black_box(std::fs::read(f).unwrap());
            }
            t.elapsed()
        })
        .collect();
    let mut state: Vec<Transcript> = Vec::new();
    let first: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            state = files
                .iter()
                .map(|f| {
                    let mut tr = Transcript::default();
                    read_new(f, &mut tr).unwrap();
                    tr
                })
                .collect();
            t.elapsed()
        })
        .collect();
    for tr in &state {
        assert_eq!(tr.messages as usize, expect, "each answer counted once");
    }
    // One new answer per agent, then the update; the same new answer again in a full re-read.
    let mut update = Vec::new();
    let mut reread = Vec::new();
    for r in 0..runs.max(5) {
        for f in &files {
            let mut h = std::fs::OpenOptions::new().append(true).open(f).unwrap();
            h.write_all((answer(1_000_000 + r) + &tool_result(r)).as_bytes())
                .unwrap();
        }
        let t = Instant::now();
        for (f, tr) in files.iter().zip(state.iter_mut()) {
            read_new(f, tr).unwrap();
        }
        update.push(t.elapsed());
        let t = Instant::now();
        for f in &files {
            let mut tr = Transcript::default();
            read_new(f, &mut tr).unwrap();
            std::hint::black_box(sum(&tr.by_model));
        }
        reread.push(t.elapsed());
    }
    assert_eq!(state[0].messages as usize, expect + runs.max(5));
    let (raw, first, update, reread) = (stats(raw), stats(first), stats(update), stats(reread));
    header();
    row("raw read of every byte (floor)", &raw, &raw, "-");
    row("first read (count every answer)", &first, &raw, "-");
    row("full re-read after one answer", &reread, &raw, "-");
    row("incremental update after one answer", &update, &reread, "<10 ms/agent");
    println!(
        "update per agent: p50 {:.3} ms (target < 10 ms); {:.0}x faster than a full re-read",
        update.p50.as_secs_f64() * 1000.0 / agents as f64,
        reread.p50.as_secs_f64() / update.p50.as_secs_f64()
    );
}
