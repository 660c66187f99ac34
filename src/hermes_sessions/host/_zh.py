"""The Simplified Chinese texts of the host helpers."""

from __future__ import annotations

from typing import Final

from hermes_sessions.host._notices import NoticeTemplates
from hermes_sessions.host._prompt import ContextPromptTemplates

__all__ = ["CONTEXT_PROMPT_ZH", "NOTICES_ZH"]

CONTEXT_PROMPT_ZH: Final = ContextPromptTemplates(
    header="## 对话环境",
    platform="平台：{platform}。",
    dm="这是与{user}的私聊。",
    dm_unknown="这是一个私聊。",
    group="这是{chat_type}「{chat}」。",
    group_unnamed="这是一个{chat_type}聊天。",
    thread="你正在话题「{thread}」中回复。",
    topic="主题：{topic}",
    shared=(
        "这个对话有多人参与：每条用户消息都以方括号中的发送者名字开头，例如「{example}」。"
        "需要时请称呼对方的名字。"
    ),
    speaker="你正在与{user}对话。",
    sender_prefix="[{user}] ",
    unknown_user="某人",
)
"""Simplified Chinese sentences.

.. versionadded:: 0.1.0
"""


NOTICES_ZH: Final = NoticeTemplates(
    idle_user="◐ 已开始新的对话：这里已有 {duration} 没有消息。发送 /resume 可回到之前的对话。",
    daily_user="◐ 已开始新的对话：会话每天 {hour}（{zone}）重置。发送 /resume 可回到之前的对话。",
    suspended_user="◐ 已开始新的对话：之前的对话已被挂起。发送 /resume 可回到该对话。",
    idle_note=(
        "[系统提示：上一个会话因 {duration} 无活动而结束，这是一个新会话。之前的消息不在你的"
        "上下文中；如果用户提到它们，请搜索历史会话。]"
    ),
    daily_note=(
        "[系统提示：会话每天 {hour}（{zone}）重置，这是一个新会话。之前的消息不在你的上下文中；"
        "如果用户提到它们，请搜索历史会话。]"
    ),
    suspended_note=(
        "[系统提示：上一个会话已被挂起，这是一个新会话。之前的消息不在你的上下文中；"
        "如果用户提到它们，请搜索历史会话。]"
    ),
    size_user="◐ 这段对话已经很长，已转入新的会话继续。发送 /resume 可回到之前的会话。",
    retention_user="◐ 已开始新的对话：之前的对话已按数据保留策略删除。",
    size_note=(
        "[系统提示：上一个会话已达到大小上限，这个会话是它的延续。之前的消息不在你的上下文中；"
        "如果用户提到它们，请搜索历史会话。]"
    ),
    retention_note="[系统提示：上一个会话已按保留策略删除，这是一个新会话。它的消息已不存在。]",
    hours="{} 小时",
    minutes="{} 分钟",
)
"""Simplified Chinese notices.

.. versionadded:: 0.1.0
"""
