package main

import (
	"fmt"
)

// text is one text in each language. The Japanese is the design's where
// the design writes it (§6.2, §8.1, §9.2).
type text struct{ ja, en string }

func (t text) in(l Lang) string {
	if l == English {
		return t.en
	}
	return t.ja
}

// The design's rejection codes and messages (§6.2, §8.1), and the codes of
// the other refusals. The Msg constants are the Japanese messages.
const (
	CodeSystemOverload      = "SYSTEM_OVERLOAD"
	CodeUserAlreadyHasModal = "USER_ALREADY_HAS_MODAL"
	CodeOverCapacity        = "OVER_CAPACITY"
	CodeCrossOrigin         = "CROSS_ORIGIN"
	CodeUnknownHost         = "UNKNOWN_HOST"
	// CodeUIUsersFull: MAX_UI_USERS pages already have a suggest stream.
	CodeUIUsersFull = "UI_USERS_FULL"

	MsgSystemOverload      = "サーバーが高負荷のためしばらく経ってからお試しください"
	MsgUserAlreadyHasModal = "既に別のカメラを表示中です"
	MsgOverCapacity        = "現在多数のアクセスがありストリーム数が上限に達しています。しばらく経ってからアクセスしてください"
	MsgCrossOrigin         = "他のサイトからのリクエストは受け付けません"
	MsgUnknownHost         = "このホスト名では受け付けません（ALLOWED_HOSTS を確認してください）"
)

// messages are the API's messages by error code; some take arguments.
var messages = map[string]text{
	CodeSystemOverload:       {MsgSystemOverload, "The server is under heavy load. Please try again in a little while."},
	CodeUserAlreadyHasModal:  {MsgUserAlreadyHasModal, "You are already viewing another camera."},
	CodeOverCapacity:         {MsgOverCapacity, "Many people are watching right now and the streams are at their limit. Please try again in a little while."},
	CodeCrossOrigin:          {MsgCrossOrigin, "Requests from other sites are not accepted."},
	CodeUnknownHost:          {MsgUnknownHost, "This host name is not accepted (see ALLOWED_HOSTS)."},
	CodeUIUsersFull:          {"同時に利用できるUIユーザー数の上限（%d人）に達しているため、サジェストは表示されません。空きができると自動で表示されます。", "The page already has its maximum of %d users, so the suggest stream is not shown to you. It starts by itself as soon as a place is free."},
	"BAD_JSON":               {"リクエストのJSONが不正です", "The request's JSON is invalid."},
	"INVALID_ARGUMENT":       {"リクエストの値が不正です", "A value in the request is invalid."},
	"BODY_TOO_LARGE":         {"リクエストが大きすぎます", "The request is too large."},
	"UNSUPPORTED_MEDIA_TYPE": {"Content-Type は application/json にしてください", "Send the request with Content-Type: application/json."},
	"NO_SESSION":             {"セッションがありません", "There is no session."},
	"NOT_YOUR_LEASE":         {"このLeaseは別のセッションのものです", "This lease belongs to another session."},
	"LEASE_NOT_FOUND":        {"Leaseが見つかりません（解放済みか期限切れです）", "No such lease (it was released or has expired)."},
	"LEASE_EXPIRED":          {"Leaseの期限が切れています", "The lease has expired."},
	"UNAVAILABLE":            {"サーバーが停止中です。しばらく経ってからお試しください", "The server is stopping. Please try again in a little while."},
	"INTERNAL":               {"サーバー内部のエラーです", "Internal server error."},
	"recovering":             {"Leaseの保存先が復旧中です。しばらく経ってからお試しください", "The lease store is recovering. Please try again in a little while."},
	"UNKNOWN_CAMERA":         {"カメラ %q はありません", "There is no camera %q."},
	"INVALID_QUALITY":        {"quality %q は sub か main にしてください", "quality %q must be sub or main."},
	"LEASE_CAMERA_MISMATCH":  {"このLeaseはカメラ %s のものではありません", "This lease is not for camera %s."},
	"SUGGEST_DISABLED":       {"サジェストは無効です", "Suggest streams are turned off."},
	"INVALID_MINUTES":        {"minutes は 1 から保持期間までの整数にしてください", "minutes must be a whole number from 1 up to the retention period."},
}

// message returns the message of code in l, formatted with args.
func message(l Lang, code string, args ...any) string {
	t, ok := messages[code]
	if !ok {
		return code
	}
	if len(args) == 0 {
		return t.in(l)
	}
	return fmt.Sprintf(t.in(l), args...)
}

// codes maps leasehttp's codes to this API's.
var codes = map[string]string{
	"overloaded":             CodeSystemOverload,
	"holder_has_lease":       CodeUserAlreadyHasModal,
	"over_capacity":          CodeOverCapacity,
	"bad_json":               "BAD_JSON",
	"invalid_argument":       "INVALID_ARGUMENT",
	"body_too_large":         "BODY_TOO_LARGE",
	"unsupported_media_type": "UNSUPPORTED_MEDIA_TYPE",
	"no_holder":              "NO_SESSION",
	"not_holder":             "NOT_YOUR_LEASE",
	"not_found":              "LEASE_NOT_FOUND",
	"expired":                "LEASE_EXPIRED",
	"unavailable":            "UNAVAILABLE",
	"internal":               "INTERNAL",
	"cross_site":             CodeCrossOrigin,
	"unknown_host":           CodeUnknownHost,
	"recovering":             "recovering",
}

// pageTexts are the page's texts: index.html's by key, and those app.js
// shows (it reads them from the page).
var pageTexts = map[string]text{
	"title":          {"カメラ監視", "Camera monitor"},
	"quality":        {"画質", "Quality"},
	"main":           {"メイン", "Main"},
	"sub":            {"サブ", "Sub"},
	"main_option":    {"メイン (2 units)", "Main (2 units)"},
	"sub_option":     {"サブ (1 unit)", "Sub (1 unit)"},
	"status":         {"システム状態", "System status"},
	"memory":         {"メモリ", "Memory"},
	"modals":         {"モーダル", "Modals"},
	"budget_left":    {"残り予算", "Budget left"},
	"ui_users":       {"UIユーザー", "UI users"},
	"usage":          {"使用量", "Usage"},
	"spark":          {"モーダル数と拒否数の推移", "Open modals and rejections over time"},
	"spark_modals":   {"モーダル数", "open modals"},
	"spark_rejected": {"拒否数", "rejections"},
	"spark_window":   {"(直近30分, admission_metrics)", "(last 30 minutes, admission_metrics)"},
	"cameras":        {"カメラ一覧", "Cameras"},
	"suggest":        {"サジェスト", "suggest"},
	"close_x":        {"閉じる ✕", "Close ✕"},
	"close":          {"閉じる", "Close"},
	"reconnect":      {"再接続", "Reconnect"},
	"ttl_title":      {"表示時間が終了しました", "Your viewing time is over"},
	"ttl_message":    {"続けて表示しますか？", "Keep watching?"},
	"lost_title":     {"接続が切れました", "Connection lost"},
	"lost_message":   {"Leaseが失われました ({code})。再接続しますか？", "The lease was lost ({code}). Reconnect?"},
	"hidden_title":   {"表示を停止しました", "Stream stopped"},
	"hidden_message": {"タブがバックグラウンドに移ったため、ストリームを解放しました。", "The tab went to the background, so its stream was given back."},
	"fallback":       {"（予算不足のためサブに切替）", " (switched to sub: not enough budget for main)"},
	"remaining":      {"残り {m}:{ss}", "{m}:{ss} left"},
	"hb_before":      {"Heartbeat ", "Heartbeats: "},
	"hb_after":       {"回", ""},
	"normal":         {"正常", "Normal"},
	"warning":        {"注意", "Warning"},
	"overloaded":     {"高負荷", "Overloaded"},
	"switch":         {"言語", "Language"},
}

// textsIn returns the page's texts in l.
func textsIn(l Lang) map[string]string {
	out := make(map[string]string, len(pageTexts))
	for k, t := range pageTexts {
		out[k] = t.in(l)
	}
	return out
}
