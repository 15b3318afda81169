//! The demo agent's terminal: raw mode with bracketed paste for as long as it runs,
//! and input read the way a real agent CLI reads it (a paste is one message, Enter
//! submits), so verified delivery is exercised against the same screens.

use std::io::Write;
use std::os::unix::io::AsRawFd;

/// Raw mode + bracketed paste for the life of the value.
pub(super) struct Terminal {
    saved: Option<libc::termios>,
}

impl Terminal {
    pub(super) fn enter() -> Terminal {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: tcgetattr/tcsetattr on stdin with a zeroed, then filled, termios.
        let saved = unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) != 0 {
                None
            } else {
                let orig = t;
                libc::cfmakeraw(&mut t);
                t.c_oflag |= libc::OPOST | libc::ONLCR;
                libc::tcsetattr(fd, libc::TCSANOW, &t);
                Some(orig)
            }
        };
        print!("\x1b[?2004h");
        let _ = std::io::stdout().flush();
        Terminal { saved }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        print!("\x1b[?2004l");
        let _ = std::io::stdout().flush();
        if let Some(t) = self.saved {
            // SAFETY: restoring the attributes read in enter().
            unsafe {
                libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, &t);
            }
        }
    }
}

/// Whether stdin has something to read within `wait`.
pub(super) fn readable_within(wait: std::time::Duration) -> bool {
    let mut fds = libc::pollfd {
        fd: std::io::stdin().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fds, 1, wait.as_millis() as libc::c_int) > 0 }
}

/// Input line state: typed text and pastes.
#[derive(Default)]
pub(super) struct Input {
    text: String,
    pasted_chars: usize,
    in_paste: bool,
    esc: Vec<u8>,
    /// Bytes not yet decoded: a UTF-8 character split across reads waits here.
    raw: Vec<u8>,
    /// Take a finished paste into the input only this long after it ended, while keys
    /// (Enter) act at once: what Claude Code was seen doing mid-turn, where an Enter sent
    /// right after a paste met an empty input and the text stayed unsent
    /// (`AO_DEMO_LATE_PASTE_MS`, for tests).
    pub(super) late: Option<std::time::Duration>,
    /// Where the paste under way began in `text` (bytes).
    paste_from: usize,
    /// A finished paste waiting to be taken in, and when.
    held: Option<(String, std::time::Instant)>,
}

/// How many characters of the input an expanded display shows (the end, where a check-in's
/// tag is): one terminal row, so a redraw never leaves stale rows above it.
const EXPANDED_CHARS: usize = 60;

impl Input {
    /// An empty input taking pastes in `late` after they end (see [`Input::late`]).
    pub(super) fn with_late(late: Option<std::time::Duration>) -> Input {
        Input {
            late,
            ..Input::default()
        }
    }

    /// The input line as drawn: a paste collapsed to a marker (as Claude Code draws a long
    /// one), or with `expanded` the text itself, newlines as `⏎`, its end on one row (as
    /// Codex, Gemini and Kiro draw a multi-line paste; `AO_DEMO_SHOW_PASTE=1`).
    pub(super) fn display(&self, expanded: bool) -> String {
        if expanded {
            let flat: Vec<char> = self.text.chars().map(|c| if c == '\n' { '⏎' } else { c }).collect();
            return if flat.len() > EXPANDED_CHARS {
                format!("…{}", flat[flat.len() - EXPANDED_CHARS..].iter().collect::<String>())
            } else {
                flat.into_iter().collect()
            };
        }
        if self.pasted_chars > 0 {
            format!(
                "[pasted {} chars]{}",
                self.pasted_chars,
                self.text.chars().skip(self.pasted_chars).collect::<String>()
            )
        } else {
            self.text.clone()
        }
    }

    /// Feed bytes; returns the messages submitted.
    pub(super) fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        let mut raw = std::mem::take(&mut self.raw);
        for &b in bytes {
            if !self.esc.is_empty() || b == 0x1b {
                self.esc.push(b);
                let seq = self.esc.as_slice();
                if seq == b"\x1b[200~" {
                    self.flush_raw(&mut raw);
                    self.in_paste = true;
                    self.paste_from = self.text.len();
                    self.esc.clear();
                } else if seq == b"\x1b[201~" {
                    self.flush_raw(&mut raw);
                    self.in_paste = false;
                    self.esc.clear();
                    if let Some(lag) = self.late {
                        let pasted = self.text.split_off(self.paste_from.min(self.text.len()));
                        self.pasted_chars -= pasted.chars().count().min(self.pasted_chars);
                        self.held = Some((pasted, std::time::Instant::now() + lag));
                    }
                } else if !(b"\x1b[200~".starts_with(seq) || b"\x1b[201~".starts_with(seq)) {
                    // Some other escape sequence: inside a paste keep it verbatim, else drop it.
                    if self.in_paste {
                        raw.extend_from_slice(&self.esc);
                    }
                    self.esc.clear();
                }
                continue;
            }
            if self.in_paste {
                raw.push(if b == b'\r' { b'\n' } else { b });
                continue;
            }
            if b < 0x20 || b == 0x7f {
                self.flush_raw(&mut raw);
            }
            match b {
                b'\r' | b'\n' if !self.text.is_empty() => {
                    out.push(std::mem::take(&mut self.text));
                    self.pasted_chars = 0;
                }
                b'\r' | b'\n' => {}
                0x7f | 0x08 => {
                    self.text.pop();
                    self.pasted_chars = self.pasted_chars.min(self.text.chars().count());
                }
                0x03 => {
                    self.text.clear();
                    self.pasted_chars = 0;
                }
                b if b >= 0x20 => raw.push(b),
                _ => {}
            }
            self.flush_complete(&mut raw);
        }
        self.flush_complete(&mut raw);
        self.raw = raw;
    }

    /// Take in a held paste whose time has come; whether one was.
    pub(super) fn release(&mut self, now: std::time::Instant) -> bool {
        match self.held.take() {
            Some((pasted, at)) if at <= now => {
                self.pasted_chars += pasted.chars().count();
                self.text.push_str(&pasted);
                true
            }
            other => {
                self.held = other;
                false
            }
        }
    }

    /// Decode everything (an incomplete tail becomes U+FFFD): used at paste and control boundaries.
    pub(super) fn flush_raw(&mut self, raw: &mut Vec<u8>) {
        if raw.is_empty() {
            return;
        }
        let s = String::from_utf8_lossy(raw).into_owned();
        self.push(&s);
        raw.clear();
    }

    /// Decode the complete UTF-8 prefix; keep a split character's bytes for the next read.
    pub(super) fn flush_complete(&mut self, raw: &mut Vec<u8>) {
        let keep = match std::str::from_utf8(raw) {
            Ok(_) => 0,
            Err(e) if e.error_len().is_none() => raw.len() - e.valid_up_to(),
            Err(_) => 0,
        };
        let tail = raw.split_off(raw.len() - keep);
        self.flush_raw(raw);
        *raw = tail;
    }

    pub(super) fn push(&mut self, s: &str) {
        if self.in_paste {
            self.pasted_chars += s.chars().count();
        }
        self.text.push_str(s);
    }
}
