//! The report: markdown rows for the terminal and README, and the same figures as JSON.

use std::fmt::Write;

/// One figure with its goal.
pub struct Figure {
    pub scenario: String,
    pub name: String,
    pub value: String,
    /// The number behind `value` (for JSON).
    pub number: f64,
    pub goal: Option<String>,
    pub met: Option<bool>,
}

#[derive(Default)]
pub struct Report {
    pub figures: Vec<Figure>,
}

impl Report {
    pub fn add(&mut self, scenario: &str, name: &str, value: String, number: f64) {
        self.figures.push(Figure {
            scenario: scenario.into(),
            name: name.into(),
            value,
            number,
            goal: None,
            met: None,
        });
    }

    /// Exclusion violations: a goal of zero.
    pub fn violations(&mut self, scenario: &str, name: &str, violations: usize) {
        self.goal(
            scenario,
            name,
            violations.to_string(),
            violations as f64,
            "0",
            violations == 0,
        );
    }

    pub fn goal(
        &mut self,
        scenario: &str,
        name: &str,
        value: String,
        number: f64,
        goal: &str,
        met: bool,
    ) {
        self.figures.push(Figure {
            scenario: scenario.into(),
            name: name.into(),
            value,
            number,
            goal: Some(goal.into()),
            met: Some(met),
        });
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from("| scenario | figure | value | goal |\n|---|---|---|---|\n");
        for f in &self.figures {
            let goal = match (&f.goal, f.met) {
                (Some(goal), Some(true)) => format!("{goal} ✅"),
                (Some(goal), Some(false)) => format!("{goal} ❌"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                f.scenario, f.name, f.value, goal
            );
        }
        out
    }

    pub fn json(&self, header: &[(&str, String)]) -> String {
        let mut out = String::from("{\n");
        for (key, value) in header {
            let _ = writeln!(out, "  \"{}\": \"{}\",", escape(key), escape(value));
        }
        out.push_str("  \"figures\": [\n");
        for (i, f) in self.figures.iter().enumerate() {
            let number = if f.number.is_finite() {
                format!("{}", f.number)
            } else {
                "null".into()
            };
            let _ = write!(
                out,
                "    {{\"scenario\": \"{}\", \"figure\": \"{}\", \"value\": \"{}\", \"number\": {}, \"goal\": {}, \"met\": {}}}",
                escape(&f.scenario),
                escape(&f.name),
                escape(&f.value),
                number,
                f.goal.as_ref().map_or("null".into(), |g| format!("\"{}\"", escape(g))),
                f.met.map_or("null".into(), |m| m.to_string()),
            );
            out.push_str(if i + 1 < self.figures.len() {
                ",\n"
            } else {
                "\n"
            });
        }
        out.push_str("  ]\n}\n");
        out
    }
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
