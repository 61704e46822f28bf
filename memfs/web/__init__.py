"""The Memory tab: where people sign in and govern memory (``web_app``); the JSON API today."""
