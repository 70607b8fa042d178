//! A tracing subscriber that keeps every span and event, for tests that check what
//! tower-lock reports. Installed once per test process as the global default; tests tell
//! their records apart by their unique lock names.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name, target, fields, parent, and whether it has closed.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub id: u64,
    pub name: &'static str,
    pub target: String,
    pub fields: BTreeMap<String, String>,
    pub parent: Option<u64>,
    pub closed: bool,
    refs: usize,
}

/// An event as recorded, with the span it happened in.
#[derive(Clone, Debug)]
pub struct EventRecord {
    pub level: tracing::Level,
    pub target: String,
    pub fields: BTreeMap<String, String>,
    pub span: Option<u64>,
}

impl EventRecord {
    pub fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Records {
    spans: HashMap<u64, SpanRecord>,
    events: Vec<EventRecord>,
}

/// The capturing subscriber; cheap to clone (shared records).
#[derive(Clone, Default)]
pub struct Capture {
    records: Arc<Mutex<Records>>,
    next_id: Arc<AtomicU64>,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn current() -> Option<u64> {
    ENTERED.with(|stack| stack.borrow().last().copied())
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Capture {
    /// The capture installed as this process's global subscriber (once).
    pub fn global() -> Capture {
        static GLOBAL: OnceLock<Capture> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let capture = Capture::default();
                tracing::subscriber::set_global_default(capture.clone())
                    .expect("no other global subscriber in this test binary");
                capture
            })
            .clone()
    }

    /// Spans named `name` whose `key` field ends with `key`.
    pub fn spans(&self, name: &str, key: &str) -> Vec<SpanRecord> {
        let records = self.records.lock().unwrap();
        let mut spans: Vec<_> = records
            .spans
            .values()
            .filter(|s| s.name == name && s.fields.get("key").is_some_and(|k| k.ends_with(key)))
            .cloned()
            .collect();
        spans.sort_by_key(|s| s.id);
        spans
    }

    /// A span by id.
    pub fn span(&self, id: u64) -> Option<SpanRecord> {
        self.records.lock().unwrap().spans.get(&id).cloned()
    }

    /// Spans whose parent is `parent`.
    pub fn children(&self, parent: u64) -> Vec<SpanRecord> {
        let records = self.records.lock().unwrap();
        let mut spans: Vec<_> = records
            .spans
            .values()
            .filter(|s| s.parent == Some(parent))
            .cloned()
            .collect();
        spans.sort_by_key(|s| s.id);
        spans
    }

    /// Events whose message contains `text`.
    pub fn events(&self, text: &str) -> Vec<EventRecord> {
        let records = self.records.lock().unwrap();
        records
            .events
            .iter()
            .filter(|e| e.message().contains(text))
            .cloned()
            .collect()
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = if attrs.is_root() {
            None
        } else {
            attrs.parent().map(Id::into_u64).or_else(current)
        };
        let span = SpanRecord {
            id,
            name: attrs.metadata().name(),
            target: attrs.metadata().target().to_owned(),
            fields,
            parent,
            closed: false,
            refs: 1,
        };
        self.records.lock().unwrap().spans.insert(id, span);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(span) = self.records.lock().unwrap().spans.get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = if event.is_root() {
            None
        } else {
            event.parent().map(Id::into_u64).or_else(current)
        };
        self.records.lock().unwrap().events.push(EventRecord {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
            span,
        });
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|stack| stack.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|stack| {
            let mut stack = stack.borrow_mut();
            if let Some(at) = stack.iter().rposition(|&id| id == span.into_u64()) {
                stack.remove(at);
            }
        });
    }

    fn clone_span(&self, id: &Id) -> Id {
        if let Some(span) = self.records.lock().unwrap().spans.get_mut(&id.into_u64()) {
            span.refs += 1;
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let mut records = self.records.lock().unwrap();
        let Some(span) = records.spans.get_mut(&id.into_u64()) else {
            return false;
        };
        span.refs = span.refs.saturating_sub(1);
        span.closed = span.refs == 0;
        span.closed
    }
}
