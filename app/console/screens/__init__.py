"""The console pages: one thin script each, run by st.navigation in main.py."""
