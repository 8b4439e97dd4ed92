//! Instagram Reels (in progress): URL forms and shortcodes, the reading of Instagram's
//! answers and walls, and a reader of a post and its comments over HTTP (logged out). The
//! session path, creators and the wiring into `Platform` come next.

pub mod parse;
pub mod reader;
pub mod shortcode;
pub mod urls;
