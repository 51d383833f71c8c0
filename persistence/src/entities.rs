//! sea-orm entities, one per table. Rows only; the rules live in the query modules and above.

pub mod api_key;
pub mod business;
pub mod user;
pub mod workspace;
pub mod workspace_member;
