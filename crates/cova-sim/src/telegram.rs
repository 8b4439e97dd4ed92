//! A stand-in for the Telegram Bot API's `sendMessage`: records every message and answers like
//! Telegram. Chat ids pick failures: `-400` is an unknown chat (400), `-403` a bot blocked by
//! the user (403), `-503` a Telegram outage (503); any other chat receives the message.

use crate::history::Ring;
use actix_web::HttpResponse;
use serde::Serialize;
use serde_json::json;

/// One message as the simulator received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TelegramMessage {
    pub bot_token: String,
    pub chat_id: String,
    pub text: String,
}

/// Handles `POST /bot<token>/sendMessage`; `None` for any other path.
pub(crate) fn handle(path: &str, body: &[u8], sent: &mut Ring<TelegramMessage>) -> Option<HttpResponse> {
    let token = path.strip_prefix("/bot")?.strip_suffix("/sendMessage")?;
    let body: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let chat_id = match &body["chat_id"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return Some(failure(400, "Bad Request: chat_id is empty")),
    };
    let Some(text) = body["text"].as_str() else { return Some(failure(400, "Bad Request: message text is empty")) };
    match chat_id.as_str() {
        "-400" => return Some(failure(400, "Bad Request: chat not found")),
        "-403" => return Some(failure(403, "Forbidden: bot was blocked by the user")),
        "-503" => return Some(HttpResponse::ServiceUnavailable().finish()),
        _ => {}
    }
    sent.push(TelegramMessage { bot_token: token.to_owned(), chat_id: chat_id.clone(), text: text.to_owned() });
    // Counted over every message, so ids keep rising once old ones leave the history.
    Some(HttpResponse::Ok().json(json!({
        "ok": true,
        "result": {"message_id": sent.pushed(), "chat": {"id": chat_id}, "date": 0, "text": text},
    })))
}

fn failure(code: u16, description: &str) -> HttpResponse {
    let status = actix_web::http::StatusCode::from_u16(code).unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
    HttpResponse::build(status).json(json!({"ok": false, "error_code": code, "description": description}))
}
