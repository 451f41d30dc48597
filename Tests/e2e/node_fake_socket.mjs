// A WebSocket that is not one, for the client library's tests under Node: it opens at once,
// keeps what the client sends (parsed), and hands the client whatever frames a test gives it, in
// exactly that order. `sockets` holds every one made, in order.
export const sockets = [];

export class FakeSocket {
  constructor(url) {
    this.url = url;
    this.sent = [];
    sockets.push(this);
    queueMicrotask(() => this.onopen?.());
  }
  send(text) { this.sent.push(JSON.parse(text)); }
  close() {}
  receive(frame) { this.onmessage?.({ data: JSON.stringify(frame) }); }
}
