// Heartbeat: how the client's WebSocket notices a gateway that stopped answering.

import { Emitter } from './emitter.js';

const PING = JSON.stringify({ type: 'ping' });

/** A clock that only moves forward: setting the wall clock neither fakes a silence nor hides one. */
const now = typeof performance !== 'undefined' && typeof performance.now === 'function'
  ? () => performance.now() : () => Date.now();

/**
 * Connection's base class. A gateway that stops answering while its socket stays open (a frozen
 * process, a dead network path) closes nothing, and a browser sees no WebSocket-level pings: the
 * client would look connected for good. So, while the socket is open, once `heartbeatMs` has
 * passed with no frame received the client sends `{"type":"ping"}` (docs/PROTOCOL.md), and when no
 * frame at all comes within `heartbeatTimeoutMs` after it, the connection is lost. A frame only
 * notes the time it came, so a busy connection resets no timer and sends no ping: one timer runs,
 * and looks at that time when it fires.
 *
 * It works on the state that ReceptionistClient's constructor sets up (`_heartbeatMs`,
 * `_heartbeatTimeoutMs`, `_heartbeatTimer`, `_heardAt`, `_pingedAt`, and Connection's `_socket`,
 * `_open` and `_generation`), and calls back Connection's `_lost`.
 */
export class Heartbeat extends Emitter {
  /** A socket opened: the heartbeat starts (unless `heartbeatMs` is 0, which turns it off). */
  _startHeartbeat(generation) {
    this._stopHeartbeat();
    this._heardAt = now();
    if (this._heartbeatMs > 0) this._armHeartbeat(generation, this._heartbeatMs);
  }

  /** A frame came, any frame: the gateway is answering. */
  _heard() { this._heardAt = now(); }

  /** The socket is dropped, lost or the client closed: no timer outlives it. */
  _stopHeartbeat() {
    clearTimeout(this._heartbeatTimer);
    this._heartbeatTimer = null;
    this._pingedAt = null;
  }

  _armHeartbeat(generation, ms) {
    this._heartbeatTimer = setTimeout(() => this._checkHeartbeat(generation), ms);
  }

  _checkHeartbeat(generation) {
    this._heartbeatTimer = null;
    if (generation !== this._generation || !this._open) return;
    const at = now();
    if (this._pingedAt !== null && this._heardAt < this._pingedAt) { // nothing came since the ping
      const leftMs = this._pingedAt + this._heartbeatTimeoutMs - at;
      if (leftMs > 0) this._armHeartbeat(generation, leftMs);
      else this._heartbeatMissed(generation);
      return;
    }
    this._pingedAt = null;
    const quietMs = at - this._heardAt;
    if (quietMs < this._heartbeatMs) {
      this._armHeartbeat(generation, this._heartbeatMs - quietMs);
      return;
    }
    try { this._socket.send(PING); } catch { /* a socket closing: its close, or the deadline, ends it */ }
    this._pingedAt = at;
    // Looked at again after the shorter of the two delays: once the answer is in, the next ping
    // is due `heartbeatMs` after it, not after the deadline.
    this._armHeartbeat(generation, Math.min(this._heartbeatMs, this._heartbeatTimeoutMs));
  }

  /**
   * Nothing came after the ping: the connection is lost, as when the socket closes (a `close`
   * event with code 0, the backoff, then every subscription resumes). The socket is ended unheard:
   * the closing handshake of a gateway that answers nothing may never finish.
   */
  _heartbeatMissed(generation) {
    const socket = this._socket;
    this._lost(generation, true, { code: 0, reason: `no answer to a heartbeat ping within ${this._heartbeatTimeoutMs} ms` });
    this._generation += 1; // the socket's own close, whenever it comes, is not a second loss
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = null;
      try { socket.close(); } catch { /* closing already */ }
    }
  }
}
