//! Placeholder until the pure bisection core lands.
use crate::journal::Verdict;
pub struct Dag {
    pub ids: Vec<String>,
}
impl Dag {
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}
pub enum Next {
    Test(String),
    Found(String),
    OnlySkippedLeft(Vec<String>),
}
pub struct Bisection;
impl Bisection {
    pub fn new(_d: &Dag, _bad: &str, _good: &[String]) -> Result<Bisection, String> {
        todo!()
    }
    pub fn mark(&mut self, _c: &str, _v: Verdict) {
        todo!()
    }
    pub fn next(&self) -> Next {
        todo!()
    }
    pub fn remaining(&self) -> usize {
        0
    }
    pub fn steps_left(&self) -> usize {
        0
    }
}
