FROM python:3.11-slim
CMD ["python", "--version"]
