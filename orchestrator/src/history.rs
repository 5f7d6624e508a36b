//! Placeholder until the git2 loader lands.
use crate::search::Dag;
pub struct History;
pub struct CommitInfo {
    pub id: String,
    pub subject: String,
    pub author: String,
    pub date: String,
}
impl History {
    pub fn open(_p: &std::path::Path) -> Result<History, String> {
        todo!()
    }
    pub fn resolve(&self, _r: &str) -> Result<String, String> {
        todo!()
    }
    pub fn load_range(&self, _bad: &str, _goods: &[String]) -> Result<Dag, String> {
        todo!()
    }
    pub fn info(&self, _id: &str) -> Result<CommitInfo, String> {
        todo!()
    }
}
